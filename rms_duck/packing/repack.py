"""Re-pack a receipt's recorded inputs with its recorded budget and config.

Pure: no DuckDB, no clock. replay.py and the rms_replay() SQL macro (through a UDF) both
call it, so Python and SQL replays cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ..bundle import MemoryBundle
from ..config import parse_config
from ..errors import ReceiptError
from ..formats.legacy import LEGACY
from ..tokens.counter import LineCounter
from .compat import packing_of
from .pipeline import pack_candidates


def repack(inputs: str, *, budget: int | None, config: Mapping[str, Any] | str | None,
           receipt_version: int | None = None) -> MemoryBundle:
    """Pack the stored inputs (rms_bundles.inputs) again.

    Args:
        inputs: canonical JSON list of the validated candidates, as stored.
        budget: the receipt's budget (None when it has none; validated like any budget).
        config: the receipt's config (dict or JSON text).

    Returns:
        The re-packed bundle; identical inputs give an identical context.

    Raises:
        ReceiptError: the inputs are not a JSON list or the receipt has no budget.
        CandidateError, ConfigError: a recorded candidate or setting no longer validates.

    >>> repack('[{"id": "n1", "score": 0.5, "content": "hello"}]', budget=200,
    ...        config=None).tokens_used > 0
    True
    """
    try:
        rows = json.loads(inputs)
    except (TypeError, ValueError) as exc:
        raise ReceiptError(
            f"stored inputs are not valid JSON ({exc}): {_clip(inputs)!r}; the bundle row was "
            "edited after it was written: restore it from a backup") from None
    if not isinstance(rows, list):
        raise ReceiptError(
            f"stored inputs must be a JSON list of candidates, got {_clip(inputs)!r}; "
            "restore the bundle row from a backup")
    if budget is None:
        raise ReceiptError("the receipt has no 'budget' field, got None; it cannot be replayed "
                           "(restore the receipt from a backup)")
    if not isinstance(budget, int) or isinstance(budget, bool):
        # A pack records a whole number; anything else was edited in afterwards.
        raise ReceiptError(f"the receipt's 'budget' must be a whole number, got {budget!r}; it "
                           "was edited after it was written: restore it from a backup")
    if receipt_version is not None and (not isinstance(receipt_version, int)
                                        or isinstance(receipt_version, bool)):
        raise ReceiptError(f"the receipt's 'receipt_version' must be a whole number, got "
                           f"{receipt_version!r}; it was edited after it was written: restore "
                           "it from a backup")
    if receipt_version in LEGACY:
        config = _with_frozen_format(config, LEGACY[receipt_version])
    # A private counter: replay recounts every line rather than trusting a cached or
    # persisted cost (rms_line_costs is a cache, not evidence).
    counter = LineCounter(parse_config(config).encoding, shared=False)
    with packing_of(receipt_version):
        return pack_candidates(rows, budget=budget, config=config, counter=counter)


def _clip(text: object, limit: int = 60) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + "..."


def _with_frozen_format(config: Mapping[str, Any] | str | None,
                        frozen: Mapping[str, str]) -> Mapping[str, Any] | str | None:
    """An older receipt's config with its format swapped for the frozen copy of that
    format's bytes at the receipt's version (formats/legacy.py), so the replay can
    reproduce them."""
    parsed = json.loads(config) if isinstance(config, str) else dict(config or {})
    name = parsed.get("context_format", "reader")
    if name in frozen:
        parsed["context_format"] = frozen[name]
    return parsed

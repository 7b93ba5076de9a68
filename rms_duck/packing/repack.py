"""Re-pack a receipt's recorded inputs with its recorded budget and config.

Pure: no DuckDB, no clock. replay.py and the rms_replay() SQL macro (through a UDF) both
call it, so Python and SQL replays cannot drift apart.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..bundle import MemoryBundle
from ..config import parse_config
from ..errors import ReceiptError
from ..escape import canonical_json
from ..formats import FORMATS, LEGACY_FORMATS, frozen_name
from ..formats.legacy import LEGACY
from ..receipts import RECEIPT_VERSION, SEALED_FIELDS
from ..tokens.counter import LineCounter
from .compat import packing_of
from .pipeline import pack_candidates


def repack(inputs: str, *, budget: int | None, config: Mapping[str, Any] | str | None,
           receipt_version: int | None = None,
           counter: LineCounter | None = None) -> MemoryBundle:
    """Pack the stored inputs (rms_bundles.inputs) again.

    Args:
        inputs: canonical JSON list of the validated candidates, as stored.
        budget: the receipt's budget (None when it has none; validated like any budget).
        config: the receipt's config (dict or JSON text).
        receipt_version: the receipt's version; older ones pack with their frozen formats.
        counter: the LineCounter to cost lines with (a private one when None).

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
    except RecursionError:  # no pack stores nesting deeper than a few levels
        raise ReceiptError(
            f"stored inputs are nested too deeply to read: {_clip(inputs)!r}; the bundle row "
            "was edited after it was written: restore it from a backup") from None
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
    if receipt_version is not None and not 1 <= receipt_version <= RECEIPT_VERSION:
        # Replayed as the current version, it could pass as reproduced or fail unexplained.
        raise ReceiptError(
            f"the receipt's 'receipt_version' is {receipt_version}, but this rms_duck replays "
            f"versions 1 to {RECEIPT_VERSION}: a newer version needs the rms_duck that wrote "
            "it (upgrade rms_duck); a version below 1 was never written, so it was edited "
            "after it was written: restore the receipt from a backup")
    _check_format_registered(config)
    if receipt_version in LEGACY:
        config = _with_frozen_format(config, LEGACY[receipt_version])
    # A private counter: replay recounts every line rather than trusting a cached or
    # persisted cost (rms_line_costs is a cache, not evidence).
    if counter is None:
        counter = LineCounter(parse_config(config).encoding, shared=False)
    with packing_of(receipt_version):
        return pack_candidates(rows, budget=budget, config=config, counter=counter)


def _check_format_registered(config: Mapping[str, Any] | str | None) -> None:
    """A ReceiptError when the receipt's context format is not registered here: a custom
    format replays only where it is registered, and ConfigError's "Use one of: reader, ..."
    advised changing a sealed receipt."""
    try:
        parsed = json.loads(config) if isinstance(config, str) else config
    except ValueError:
        return  # parse_config names what is wrong with it
    name = parsed.get("context_format") if isinstance(parsed, Mapping) else None
    if isinstance(name, str) and name not in FORMATS and name not in LEGACY_FORMATS:
        raise ReceiptError(
            f"the receipt's config field 'context_format' is {name!r}, a format not registered "
            f"in this process (registered: {', '.join(FORMATS)}); a pack with a custom format "
            "replays only where that format is registered: call "
            "rms_duck.register_format(YourFormat()) with the same class the packing process "
            "used, then replay (rms_duck.replay, or rms_replay() on that connection); from "
            "the command line, name the module that registers it: rms-duck audit --replay "
            "--format-module your_formats (a module name or a .py file's path)")


def parse_receipt(text: str | None, who: str) -> dict[str, Any]:
    """A stored receipt's body, or a ReceiptError saying how it was damaged. `who` names
    the receipt in the message ("receipt <id>")."""
    try:
        body = json.loads(text) if text is not None else None
    except RecursionError:  # no receipt nests deeper than a few levels
        raise ReceiptError(
            f"{who} is nested too deeply to read; it was edited after it was written: run "
            "rms_duck.verify_receipts(con) and restore it from a backup") from None
    except json.JSONDecodeError as exc:
        raise ReceiptError(
            f"{who} is not valid JSON ({exc.msg} at position {exc.pos}); it was edited after "
            "it was written: run rms_duck.verify_receipts(con) and restore it") from None
    if text is None:  # rms_replay() passes NULL for text that is not JSON
        raise ReceiptError(f"{who} is not valid JSON; it was edited after it was written: "
                           "run rms_verify_receipts() and restore it")
    if not isinstance(body, dict):
        raise ReceiptError(f"{who} must be a JSON object, got {text[:60]!r}; restore it from "
                           "a backup")
    return body


def check_receipt_body(body: Mapping[str, Any], who: str) -> list[dict[str, Any]]:
    """The receipt's decisions, once its candidates and encoding have the recorded shape;
    a ReceiptError naming the field otherwise (an edit, never a pack). `who` names the
    receipt in the message ("receipt <id>")."""
    candidates = body.get("candidates") or []
    wrong = None if isinstance(candidates, list) else f"got {_clip(repr(candidates))}"
    for i, c in enumerate(candidates if wrong is None else ()):
        if not isinstance(c, dict):
            wrong = f"candidates[{i}] is {_clip(repr(c))}"
        else:
            key = next((k for k in ("id", "content_sha256") if not isinstance(c.get(k), str)),
                       None)
            if key is not None:
                wrong = f"candidates[{i}] has {key} {_clip(repr(c.get(key)))}"
        if wrong is not None:
            break
    if wrong is not None:
        raise ReceiptError(f"{who}: field 'candidates' must be a list of decision "
                           f"objects with an 'id' and a 'content_sha256' (text), but {wrong}; "
                           "it was edited after it was written: restore it from a backup")
    encoding = body.get("encoding")
    if not isinstance(encoding, dict):
        raise ReceiptError(f"{who}: field 'encoding' must be an object with the "
                           f"encoding's name and sha256, got {encoding!r}; it was edited "
                           "after it was written: restore it from a backup")
    return candidates


def check_canonical(text: str, body: Mapping[str, Any], who: str) -> None:
    """A ReceiptError unless `text` is the canonical JSON of `body`, as rms_duck writes it.

    DuckDB's JSON functions read the first of two equal keys and Python's json the last, so a
    re-sealed receipt repeating a key showed verify and explain one receipt and replay
    another. No pack writes another spelling of its JSON, so any other is an edit too."""
    if canonical_json(body) == text:
        return
    repeated = _repeated_keys(text)
    what = ("its keys are out of order or spaced" if not repeated else
            f"it repeats the key{'s' if len(repeated) > 1 else ''} "
            f"{', '.join(map(repr, repeated))}")
    raise ReceiptError(
        f"{who} is not the canonical JSON rms_duck writes (keys sorted, each once, no "
        f"spaces): {what}; SQL audits read the first of a repeated key and replay the last, "
        "so they would check different receipts. It was edited after it was written: "
        "restore it from a backup")


def _repeated_keys(text: str) -> list[str]:
    repeated: list[str] = []

    def note(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        keys = [key for key, _ in pairs]
        repeated.extend(key for key in dict.fromkeys(keys) if keys.count(key) > 1
                        and key not in repeated)
        return dict(pairs)

    json.loads(text, object_pairs_hook=note)
    return repeated


@dataclass(frozen=True, slots=True)
class Comparison:
    """How a re-packed bundle's receipt agrees with the recorded one, beyond its context."""

    same_decisions: bool
    encoding_changed: bool
    differing_fields: tuple[str, ...]  # other receipt fields whose value differs


def compare_with_receipt(body: Mapping[str, Any], bundle: MemoryBundle) -> Comparison:
    """Compare a checked receipt body (check_receipt_body) with its replay's receipt."""
    again = json.loads(bundle.receipt)
    replayed = again["candidates"]
    if body.get("receipt_version") == 1:  # version 1 rows had no provenance fields
        replayed = [{k: v for k, v in row.items() if k not in ("source_type", "epistemic")}
                    for row in replayed]
    # A field the replay does not write either (other than the ones storage seals in)
    # was added afterwards: it differs too.
    added = set(body) - set(again) - SEALED_FIELDS
    return Comparison(
        same_decisions=replayed == body.get("candidates"),
        # The whole {name, sha256}: an edited name with the right digest is an edit too.
        encoding_changed=body["encoding"] != again["encoding"],
        differing_fields=tuple(sorted(added | {key for key in again
                                               if key not in _COMPARED_APART
                                               and body.get(key, _ABSENT) != again[key]})))


# Compared on their own (context_sha256, candidates, encoding), or inputs of the replay
# itself (budget, config: a newer PackingConfig adds fields an older receipt lacks; the
# receipt_version the replay emulates, while its body says the current one).
_COMPARED_APART = frozenset({"context_sha256", "candidates", "encoding", "budget", "config",
                             "receipt_version"})
_ABSENT = object()


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
    if isinstance(name, str):
        parsed["context_format"] = frozen_name(name, dict(frozen))
    return parsed

"""Where a lone surrogate is, named before it reaches a stored bundle.

JSON's "\\ud800" escape (json.loads keeps it, in a SQL config's JSON text too) gives Python
text a lone surrogate, half of a UTF-16 pair: the context escapes it, but no stored row can
hold it. Candidates are searched only after a store failed on one, so packs of ordinary
text pay nothing; the config, which a receipt records, is short and checked before storing.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import fields
from typing import Any

from ..errors import CandidateError, ConfigError, RmsError
from ..records import Candidate

_FIX = ("which a stored bundle cannot hold; nothing was stored: fix the text (for example "
        "text.encode('utf-8', 'replace').decode()), or pack with {no_store}")


def surrogate_error(candidates: Sequence[Candidate], *, namespace: str | None,
                    session_id: str | None) -> RmsError | None:
    """The error naming the first argument or candidate field that holds a lone surrogate
    (a structured_value's JSON text is read too: DuckDB decodes its escapes); None if none
    does."""
    for name, value in (("namespace", namespace), ("session_id", session_id)):
        found = first_surrogate(value)
        if found is not None:
            return ConfigError(f"{name} holds a lone surrogate ({found!r}, half of a UTF-16 "
                               f"pair), {_FIX.format(no_store='store=False')}")
    for index, candidate in enumerate(candidates):
        for field in fields(candidate):
            value = getattr(candidate, field.name)
            found = first_surrogate(value)
            if found is None and field.name == "structured_value" and value is not None:
                found = first_surrogate(_json_value(value))
            if found is not None:
                return CandidateError(
                    f"candidate #{index} (id {candidate.id!r}): field {field.name!r} holds a "
                    f"lone surrogate ({found!r}, half of a UTF-16 pair), "
                    f"{_FIX.format(no_store='store=False')}")
    return None


def config_surrogate_error(settings: Mapping[str, Any], *,
                           no_store: str = "store=False") -> ConfigError | None:
    """The error naming a config field (the query, say) whose text holds a lone surrogate;
    None if none does. Asked before storing: the receipt records the config, and a receipt
    holding one stores, yet DuckDB then reads it as malformed JSON, so verify_receipts
    reported a pack nobody edited as MALFORMED_RECEIPT. `no_store` names the way to pack
    without storing."""
    for name, value in settings.items():
        found = first_surrogate(value)
        if found is not None:
            return ConfigError(f"config field {name!r} holds a lone surrogate ({found!r}, half "
                               f"of a UTF-16 pair), {_FIX.format(no_store=no_store)}")
    return None


def first_surrogate(value: Any, *, json_inside: bool = False) -> str | None:
    """The first lone surrogate in any string of `value` (nested in lists, tuples and dicts,
    keys too), or None. With `json_inside`, a string holding JSON escapes is decoded once
    more and searched too (a structured_value given as JSON text)."""
    for text in _strings(value):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            return text[exc.start]
        if json_inside and "\\u" in text:
            inner = _json_value(text)
            found = first_surrogate(inner, json_inside=True) if inner is not None else None
            if found is not None:
                return found
    return None




def _strings(value: Any) -> Iterator[str]:
    """Every string in a value: itself, or nested in tuples, lists and dicts (keys too)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None

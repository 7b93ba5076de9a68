"""The field types of a SQL candidate list, checked before DuckDB casts it to rms_candidate[].

DuckDB's cast to the canonical STRUCT matches fields by name (ignoring case) and converts
every value it can: a DOUBLE pinned 0.5 becomes true, a BLOB content becomes escaped text
('caf\\xC3\\xA9'), a LIST content its text, a number id its digits; and a value it cannot
convert ('high' as a score) fails with a message that names no field. The Python entry
points refuse these by field. So pack_context() and rms_store() check the type DuckDB
reports (typeof(), one text per query) here first, and name the field, its type and the
fix; values are still checked one by one in Python after the cast.

Types whose cast keeps the value pass, where the Python entry points take the same
values: whole numbers as ids, speakers, namespaces and sessions (their digits), UUIDs and
JSON as text, any number for a score, whole numbers and DOUBLEs (and lists of them) as a
structured_value (their text is their JSON). One lossy cast passes too, because refusing it
would refuse common SQL (ceil() and avg() return DOUBLE): a fractional DOUBLE or DECIMAL
whole field (path_count 1.5) is rounded by DuckDB, where Python refuses it. The whole fields
are BIGINT in rms_candidate, so a value past 32 bits (a BIGINT row_number() of 3e9) reaches
the Python checks, which name the candidate, the field and the value. A FLOAT or DOUBLE whole
field may hold a value no cast takes (NaN, infinity, 1e19): its values are checked before the
cast (wholecast.py), so only a value outside BIGINT's range in a HUGEINT, UBIGINT or DECIMAL
still meets DuckDB's own cast error, which names no field.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..errors import CandidateError, renames_for

_INTEGERS = {"TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT",
             "UINTEGER", "UBIGINT", "UHUGEINT"}
_FLOATS = {"FLOAT", "DOUBLE"}
_TIMES = {"TIMESTAMP", "TIMESTAMP WITH TIME ZONE", "DATE", "TIMESTAMP_S", "TIMESTAMP_MS",
          "TIMESTAMP_NS", "VARCHAR"}
_NULL = '"NULL"'

# kind -> (what the field must be, how to pass it)
_KINDS = {
    "text": ("text (VARCHAR, ENUM, UUID or JSON)", "pass VARCHAR (a BLOB of UTF-8: "
                                                    "decode(x); a list: array_to_string(x, ' '))"),
    "id": ("VARCHAR, UUID or a whole number", "pass CAST(x AS VARCHAR)"),
    "label": ("text or a whole number", "pass CAST(x AS VARCHAR)"),
    "number": ("a number", "pass a DOUBLE, for example CAST(x AS DOUBLE)"),
    "whole": ("a number", "pass an INTEGER, for example CAST(round(x) AS INTEGER)"),
    "boolean": ("a BOOLEAN", "pass a BOOLEAN, for example x > 0 AS pinned"),
    "time": ("a TIMESTAMPTZ, TIMESTAMP, DATE or ISO text", "pass CAST(x AS TIMESTAMPTZ)"),
    "texts": ("a list of text", "pass a VARCHAR[] list, for example [x] or list(x)"),
    "ids": ("a list of ids", "pass a VARCHAR[] list of node ids"),
    "structured": ("JSON text, a whole number, a DOUBLE or a list of them",
                   "pass JSON text, for example to_json(x)"),
}
_FIELDS = {
    "id": "id", "superseded_by": "id", "content": "text", "speaker": "label", "prose": "text",
    "namespace_id": "label", "session_id": "label", "condition_state": "text", "type": "text",
    "epistemic_type": "text", "source_type": "text", "lifecycle_state": "text",
    "structured_value": "structured", "score": "number", "salience": "number",
    "confidence": "number", "path_count": "whole", "session_position": "whole",
    "token_cost_estimate": "whole", "pinned": "boolean", "event_time": "time",
    "valid_from": "time", "valid_to": "time", "paths": "texts", "evidence_ids": "ids",
    "contradicts": "ids",
}
_LIST_SUFFIX = re.compile(r"\[\d*\]$")
# A LIST or ARRAY of STRUCTs; NULL and a list of NULLs (the empty list) pass as no candidates.
_STRUCT_LIST = re.compile(r"STRUCT\(.*\)\[[0-9]*\]", re.DOTALL)
_NULL_TYPES = ('"NULL"', '"NULL"[]')
_DECIMAL = re.compile(r"DECIMAL\((\d+),(\d+)\)")


def check_candidate_type(type_text: str, fn: str) -> None:
    """Raise CandidateError when `type_text` (as typeof() prints it) is not a list of STRUCTs
    (or NULL), or the STRUCT lacks id, score or content, or a known field has a type DuckDB's
    cast would convert or fail on."""
    if type_text not in _NULL_TYPES and _STRUCT_LIST.fullmatch(type_text) is None:
        # DuckDB's own cast error printed the whole 26-field candidate type, not what to pass.
        advice = ("put one candidate in [ ], or aggregate ranked rows"
                  if type_text.startswith("STRUCT(") else "aggregate ranked rows")
        raise CandidateError(
            f"{fn}: candidates must be a LIST of STRUCTs (one per candidate, with at least id, "
            f"score and content), got a value of type {type_text}; {advice}: "
            f"{fn}(list({{'id': id, 'score': score, 'content': content}}), 4096)")
    missing = _missing(type_text)
    if missing:
        names, lacking = missing
        quoted = [repr(name) for name in lacking]
        what = (f"field {quoted[0]}" if len(quoted) == 1
                else f"fields {', '.join(quoted[:-1])} and {quoted[-1]}")
        # The cast fills an absent field with NULL, so each row's error read "field 'score'
        # is required ..., got None (SQL NULL); filter out NULL scores": a NULL that no row
        # held, and a fix that did not apply (as in Python, columnar.check_columns).
        others = {name.lower(): name for name in names if name.lower() not in _FIELDS}
        typos, absent = renames_for(lacking, others)
        fix = (f"rename {' and '.join(typos)}"
               + (f", and add {' and '.join(absent)} too" if absent else "") if typos else
               f"name them so, for example {fn}(list({{'id': node_id, 'score': similarity, "
               "'content': body}), 4096)")
        raise CandidateError(
            f"{fn}: the candidates lack the {what} (fields given: "
            f"{', '.join(repr(name) for name in names) or 'none'}); every candidate needs id, "
            f"score and content: {fix}")
    problem = _problem(type_text)
    if problem is not None:
        name, given, kind = problem
        expected, fix = _KINDS[kind]
        raise CandidateError(
            f"{fn}: candidate field {name!r} has type {given}, but it must be {expected} "
            f"(DuckDB's cast would change or refuse its values); {fix}")


@lru_cache(maxsize=256)
def _problem(type_text: str) -> tuple[str, str, str] | None:
    element = _LIST_SUFFIX.sub("", type_text, count=1)
    if not (element.startswith("STRUCT(") and element.endswith(")")):
        return None  # not a STRUCT list: check_candidate_type refused it already
    for name, given in _struct_fields(element[len("STRUCT("):-1]):
        kind = _FIELDS.get(name.lower())
        if kind is not None and given != _NULL and not _allowed(kind, given):
            return name, given, kind
    return None


@lru_cache(maxsize=256)
def _missing(type_text: str) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(the fields given, the required ones among id, score and content that none of them
    names) when some are missing; fields match without regard to case, as the cast does."""
    element = _LIST_SUFFIX.sub("", type_text, count=1)
    if not (element.startswith("STRUCT(") and element.endswith(")")):
        return None
    given = tuple(name for name, _ in _struct_fields(element[len("STRUCT("):-1]))
    names = {name.lower() for name in given}
    lacking = tuple(name for name in ("id", "score", "content") if name not in names)
    return (given[:20], lacking) if lacking else None


@lru_cache(maxsize=256)
def has_float_whole_field(type_text: str) -> bool:
    """A whole field (path_count, ...) of the candidate STRUCT list type is FLOAT or DOUBLE:
    its values must be checked before DuckDB's cast (wholecast.py)."""
    element = _LIST_SUFFIX.sub("", type_text, count=1)
    if not (element.startswith("STRUCT(") and element.endswith(")")):
        return False
    return any(_FIELDS.get(name.lower()) == "whole" and given in _FLOATS
               for name, given in _struct_fields(element[len("STRUCT("):-1]))


def _allowed(kind: str, given: str) -> bool:
    if kind in ("text", "label", "structured", "id"):
        # Whole numbers read as their digits where the Python entry points take them (ids,
        # labels), not as a record's text.
        return (given in ("VARCHAR", "UUID", "JSON") or given.startswith("ENUM(")
                or (kind != "text" and given in _INTEGERS)
                or (kind == "structured" and (given == "DOUBLE" or _numbers_list(given))))
    if kind in ("number", "whole"):
        return given in _INTEGERS or given in _FLOATS or _DECIMAL.fullmatch(given) is not None
    if kind == "boolean":
        return given == "BOOLEAN"
    if kind == "time":
        return given in _TIMES
    # A list of texts (ids may be UUIDs), or the empty list literal's "NULL"[].
    if not _LIST_SUFFIX.search(given):
        return False
    inner = _LIST_SUFFIX.sub("", given, count=1)
    return _allowed("id" if kind == "ids" else "label", inner) or inner == _NULL


def _numbers_list(given: str) -> bool:
    """A list of whole numbers or DOUBLEs, whose text ('[1, 2]') is the JSON of the list.
    (A FLOAT prints shorter than the Python path's float, and Python stores a DECIMAL as a
    string: both would store other inputs than the Python entry points.)"""
    inner = _LIST_SUFFIX.sub("", given, count=1)
    return inner != given and (inner in _INTEGERS or inner == "DOUBLE")


def _struct_fields(body: str) -> list[tuple[str, str]]:
    """[(name, type)] of a STRUCT's fields as typeof() prints them: names bare or in double
    quotes (a quote doubled inside), types possibly nested, with quoted ENUM members."""
    fields = []
    for part in _split_top_level(body):
        part = part.strip()
        if part.startswith('"'):
            end = 1
            while True:
                end = part.index('"', end)
                if part[end + 1:end + 2] == '"':
                    end += 2
                    continue
                break
            name, rest = part[1:end].replace('""', '"'), part[end + 1:]
        else:
            name, _, rest = part.partition(" ")
        fields.append((name, rest.strip()))
    return fields


def _split_top_level(body: str) -> list[str]:
    parts, depth, start, quote = [], 0, 0, ""
    for i, ch in enumerate(body):
        if quote:
            if ch == quote:
                quote = ""  # a doubled quote closes and reopens: the same in effect
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    return [p for p in parts if p.strip()]

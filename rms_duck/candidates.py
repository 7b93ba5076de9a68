"""Turn loosely typed rows (dicts from SQL, Arrow or Python) into validated Candidates.

Every rejection names the candidate, the field, the value and the fix, so it still reads
well behind DuckDB's "Python exception occurred while executing the UDF" prefix.
"""

from __future__ import annotations

import decimal
import json
import math
import numbers
import re
import sys
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import fields
from datetime import UTC, date, datetime
from enum import Enum
from functools import lru_cache
from typing import Any

from .errors import CandidateError, did_you_mean, renames_for
from .records import CONDITION_STATES, Candidate, Epistemic, Lifecycle, NodeType, SourceType
from .timefmt import as_utc
from .unfrozen import new, unfrozen_twin

_ENUMS: dict[str, type[Enum]] = {
    "type": NodeType,
    "epistemic_type": Epistemic,
    "source_type": SourceType,
    "lifecycle_state": Lifecycle,
}
_TIMES = ("event_time", "valid_from", "valid_to")
_TEXTS = ("namespace_id", "session_id")
_ID_LISTS = ("evidence_ids", "contradicts")


class CheckedCandidates(list):
    """Candidates that to_candidates() has just returned. Packing takes such a list as it is:
    the SQL and rms_duck.pack() paths check rows before they pack them, and checking 1,000
    Candidates again cost about 7% of a warm pack. Built only inside the package, right
    after the check, and never handed to a caller, so no unchecked row can join one."""

    __slots__ = ()


def to_candidates(rows: Iterable[Mapping[str, Any] | Candidate | None]) -> list[Candidate]:
    """Validate rows in order; raise CandidateError at the first bad one (a NULL row too).

    Plain dicts of a repeated shape whose values are already final are built by code written
    for that shape (dictrows.py); every other row is checked here, field by field."""
    from .dictrows import ShapeReader  # it builds on this module's checks

    shapes = ShapeReader()
    out = []
    for i, row in enumerate(rows):
        if type(row) is dict:
            candidate = shapes.candidate(row)
            out.append(candidate if candidate is not None else to_candidate(row, i))
        elif isinstance(row, Candidate):
            out.append(_without_nan(row, i))
        else:
            out.append(to_candidate(row, i))
    return out


def _refuse_missing_keys(row: dict[Any, Any], index: int) -> None:
    """A dict without an id, score or content key: said so, with its keys. The None that
    get() read was reported as "got None (SQL NULL); filter out NULL scores or COALESCE
    them to 0", advice for SQL that a dict or a JSON line (rms-duck pack) cannot take."""
    missing = [name for name in ("id", "score", "content") if name not in row]
    quoted = [repr(name) for name in missing]
    what = (f"field {quoted[0]} is" if len(quoted) == 1
            else f"fields {', '.join(quoted[:-1])} and {quoted[-1]} are")
    keys = ", ".join(repr(key) for key in list(row)[:20]) or "none"
    who = f"candidate #{index}" + (f" (id {row['id']!r})" if "id" in row else "")
    # Dict keys match a field only as spelled (a SQL column's case does not matter there).
    others = {key.lower(): key for key in row if isinstance(key, str) and key not in _RANK}
    typos, absent = renames_for(missing, others)
    fix = ("add them, for example {'id': 'n1', 'score': 0.9, 'content': '...'}" if not typos
           else f"rename {' and '.join(typos)}"
           + (f", and add {' and '.join(absent)}" if absent else ""))
    raise CandidateError(f"{who}: {what} required but missing (keys given: {keys}); every "
                         f"candidate needs id, score and content: {fix}")


def _without_nan(candidate: Candidate, index: int) -> Candidate:
    """A Candidate as it is, unless a number field holds NaN: a Candidate built by hand skips
    the row checks, and a NaN score outranked every other (NaN compares false both ways)."""
    c = candidate
    if (c.score == c.score and c.salience == c.salience and c.confidence == c.confidence
            and c.path_count == c.path_count and c.session_position == c.session_position
            and c.token_cost_estimate == c.token_cost_estimate):
        return c
    # The row checks refuse it, naming the first bad field as for a dict row.
    return to_candidate({name: getattr(c, name) for name in _FIELD_NAMES}, index)


def to_candidate(row: Mapping[str, Any] | None, index: int = 0) -> Candidate:
    """Validate one row. Unknown keys are ignored; NULL optional fields take defaults."""
    if type(row) is not dict and not isinstance(row, Mapping):
        raise CandidateError(
            f"candidate #{index} must be a record (STRUCT or dict), got {row!r}; "
            "build it with {'id': ..., 'score': ..., 'content': ...}"
        )
    if type(row) is not dict:
        # Another Mapping may answer get() for keys its items() spell otherwise (a
        # case-insensitive one): read every field the way get() finds it.
        row = {name: row.get(name) for name in _FIELD_NAMES}
    elif "id" not in row or "score" not in row or "content" not in row:
        _refuse_missing_keys(row, index)
    get = row.get
    where = _Where(index, get("id"))
    score = get("score")
    content = get("content")
    values: dict[str, Any] = {
        "id": _node_id(where, "id", get("id"), required=True),
        # Fast paths for the common, already-valid types; anything else takes the full check.
        "score": score if type(score) is float and 0.0 <= score <= 1.0
        else _unit(where, "score", score, required=True),
        "content": content if type(content) is str else _content(where, content),
    }
    # One pass over the row finds the optional fields it sets; they are checked in one fixed
    # order (_OPTIONAL), so the first error is the same whatever order the row's keys are in.
    # Most rows set a few of the 23: asking for each by name cost more than the checks.
    rank = _RANK.get
    present = [(position, name, value) for name, value in row.items()
               if value is not None and (position := rank(name)) is not None]
    if present:
        present.sort()
        for _, name, value in present:
            if _pandas_missing(name, value):
                continue  # NULL, as the same frame passed as a table reads it
            _CHECKS[name](where, name, value, values)
    return _new_candidate(values)


# Fields that hold numbers: there a NaN is a bad number, named in the error. A dict row
# cannot tell pandas' missing number from a NaN computed upstream (0/0); a DataFrame passed
# whole can, and reads its NaN as NULL (Arrow's from_pandas).
_NUMBERS = frozenset({"score", "salience", "confidence", "path_count", "session_position",
                      "token_cost_estimate"})


def _pandas_missing(name: str, value: object) -> bool:
    """pandas' missing value in a `df.to_dict("records")` row: pd.NA (nullable dtypes), or
    a float NaN in a field that holds no number (pandas 3's str dtype marks a missing text
    with NaN). Arrow reads both as NULL, so a dict row must too, not as the text 'nan'."""
    if isinstance(value, float):  # np.float64 too: dict(frame.iloc[i]) gives it
        return value != value and name not in _NUMBERS
    pandas = sys.modules.get("pandas")
    return pandas is not None and value is getattr(pandas, "NA", None)


def _check_enum(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    member = _ENUM_VALUES[name].get(value) if type(value) is str else None
    values[name] = member if member is not None else _enum(where, name, value, _ENUMS[name])


def _check_time(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    if type(value) is datetime and value.tzinfo is UTC:  # type: ignore[union-attr]
        values[name] = value
    elif not (isinstance(value, datetime) and value != value):  # pandas' NaT is no time: NULL
        values[name] = _instant(where, name, value)


def _check_label(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    values[name] = str(value)


def _check_condition(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    values[name] = _condition(where, value)


def _check_ids(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    values[name] = tuple(_node_id(where, name, v) for v in _sequence(where, name, value))


def _check_unit(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    values[name] = (value if type(value) is float and 0.0 <= value <= 1.0  # type: ignore[operator]
                    else _unit(where, name, value))


def _check_paths(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    values[name] = tuple([str(p) for p in _sequence(where, name, value)])


def _check_path_count(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    values[name] = _path_count(where, value, values.get("paths", ()))


def _check_flag(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    values[name] = _flag(where, name, value)


def _check_node(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    values[name] = _node_id(where, name, value)


def _check_speaker(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    values[name] = str(value).strip() or None


def _check_text(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    values[name] = _text(where, name, value)


def _check_structured(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    values[name] = _structured(where, value)


def _check_whole(where: _Where, name: str, value: object, values: dict[str, Any]) -> None:
    values[name] = _whole(where, name, value)


# The optional fields in the order their checks run: the first bad one is the one reported.
_OPTIONAL = (
    *((name, _check_enum) for name in _ENUMS),
    *((name, _check_time) for name in _TIMES),
    *((name, _check_label) for name in _TEXTS),
    ("condition_state", _check_condition),
    *((name, _check_ids) for name in _ID_LISTS),
    ("salience", _check_unit), ("confidence", _check_unit),
    ("paths", _check_paths), ("path_count", _check_path_count),
    ("pinned", _check_flag), ("superseded_by", _check_node), ("speaker", _check_speaker),
    ("prose", _check_text), ("structured_value", _check_structured),
    ("session_position", _check_whole), ("token_cost_estimate", _check_whole),
)
_RANK = {name: position for position, (name, _) in enumerate(_OPTIONAL)}
_FIELD_NAMES = ("id", "score", "content", *_RANK)
_CHECKS = dict(_OPTIONAL)


def _new_candidate(values: dict[str, Any]) -> Candidate:
    """Candidate(**values), without the frozen dataclass's per-field __setattr__ detour.

    Candidate has no __post_init__; every value here was validated above. The builder sets
    the same fields the generated __init__ would (tests compare both).
    """
    return _builder(tuple(values))(values)


@lru_cache(maxsize=256)
def _builder(given: tuple[str, ...]) -> Callable[[dict[str, Any]], Candidate]:
    """A function that sets every slot of a new Candidate, written out for the fields in
    `given` (taken from the values) and the rest (their defaults): one statement per slot
    cost half as much as a loop over (name, default, setter) triples."""
    env: dict[str, Any] = builder_env()
    body = ["def build(values):", "    obj = new(Unfrozen)"]
    for i, (name, _) in enumerate(_SLOTS):
        value = f"values[{name!r}]" if name in given else f"default{i}"
        body.append(f"    obj.{name} = {value}")
    body += ["    obj.__class__ = Candidate", "    return obj"]
    exec(compile("\n".join(body), f"<candidate builder {given}>", "exec"), env)  # noqa: S102
    return env["build"]


# Candidate's slot layout without its frozen __setattr__ (unfrozen.py): a builder fills a
# new object's slots with plain stores, a third of the cost of each slot's setter.
_Unfrozen = unfrozen_twin(Candidate)


def builder_env() -> dict[str, Any]:
    """The names a generated Candidate builder uses: `new(Unfrozen)`, then `obj.<field> =
    ...` for every field (`default<i>` is the i-th field's default), then `obj.__class__ =
    Candidate`."""
    env: dict[str, Any] = {"new": new, "Unfrozen": _Unfrozen, "Candidate": Candidate}
    env.update((f"default{i}", default) for i, (_, default) in enumerate(_SLOTS))
    return env


_SLOTS = tuple((f.name, f.default) for f in fields(Candidate))
_ENUM_VALUES = {name: {m.value: m for m in enum_type} for name, enum_type in _ENUMS.items()}
_CANONICAL_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_ANY_CASE_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                            r"[0-9a-fA-F]{12}")


class _Where:
    __slots__ = ("index", "raw_id")

    def __init__(self, index: int, raw_id: object) -> None:
        self.index, self.raw_id = index, raw_id

    def fail(self, field: str, value: object, expectation: str, fix: str) -> CandidateError:
        who = f"candidate #{self.index}"
        if self.raw_id is not None and field != "id":
            raw = self.raw_id
            shown = str(uuid.UUID(bytes=bytes(raw))) if isinstance(raw, (bytes, bytearray)) \
                and len(raw) == 16 else str(raw)  # a UUID column read as 16 bytes
            who += f" (id {shown!r})"
        return CandidateError(f"{who}: field {field!r} {expectation}, got {_show(value)}; {fix}")


def _show(value: object) -> str:
    if value is None:
        return "None (SQL NULL)"  # the same message reaches Python and SQL callers
    try:
        text = repr(value)
    except ValueError:  # an int past Python's 4,300-digit printing limit
        text = f"<a {type(value).__name__} too long to print>"
    return text if len(text) <= 80 else text[:77] + "..."


def _node_id(where: _Where, field: str, value: object, required: bool = False) -> str:
    if type(value) is str and (_CANONICAL_UUID.fullmatch(value) or (
            len(value) != 36 and value[:1].strip() and value[-1:].strip())):
        return value  # already canonical: no padding, and not a UUID spelled another way
    if value is None or (isinstance(value, str) and not value.strip()) \
            or (required and _pandas_missing(field, value)):
        raise where.fail(field, value, "is required and must be a non-empty id",
                         "give every candidate its node id (VARCHAR or UUID)")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, (bytes, bytearray)) and len(value) == 16:
        return str(uuid.UUID(bytes=bytes(value)))
    if isinstance(value, (str, numbers.Integral)) and not isinstance(value, bool):
        # str(np.int64(1)) is '1' too, but int() spells every Integral as Python does.
        text = str(value).strip() if isinstance(value, (str, int)) else str(int(value))
        if _ANY_CASE_UUID.fullmatch(text):
            return text.lower()
        return text
    raise where.fail(field, value, "must be a VARCHAR or UUID id", "cast the id to VARCHAR")


def _unit(where: _Where, field: str, value: object, required: bool = False) -> float:
    if required and (value is None or _pandas_missing(field, value)):
        raise where.fail(field, value, "is required and must be a number in [0, 1]",
                         "filter out NULL scores or COALESCE them to 0")
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, decimal.Decimal)):
        raise where.fail(field, value, "must be a number in [0, 1]", "cast it to DOUBLE")
    try:
        number = float(value)
    except (OverflowError, ValueError):  # 10**400, Decimal('sNaN')
        number = math.nan
    else:
        if number != number:
            raise where.fail(field, value, "must be a number in [0, 1]",
                             _nan_fix(required))
    if math.isnan(number) or not 0.0 <= number <= 1.0:
        raise where.fail(field, value, "must be a number in [0, 1]",
                         "normalise scores into [0, 1] (for example divide by the maximum)")
    return number


def _content(where: _Where, value: object) -> str:
    if value is None or _pandas_missing("content", value):
        raise where.fail("content", value, "is required text",
                         "pass '' for a record without text, or drop the row")
    return _text(where, "content", value)


def _text(where: _Where, field: str, value: object) -> str:
    if not isinstance(value, str):
        raise where.fail(field, value, "must be text", "cast it to VARCHAR")
    return value


def _enum(where: _Where, field: str, value: object, enum_type: type[Enum]) -> Any:
    text = str(value.value if isinstance(value, Enum) else value).strip().lower()
    try:
        return enum_type(text)
    except ValueError:
        names = [member.value for member in enum_type]
        # RFC words that are not values here: spelling-closeness would suggest the wrong one
        # ('active' -> 'archived'), so say what they mean instead.
        fix = _MEANINGS.get((field, text)) or f"use a known value.{did_you_mean(text, names)}"
        raise where.fail(field, value, f"must be one of {', '.join(names)}", fix) from None


_MEANINGS = {
    ("lifecycle_state", "active"):
        "an ACTIVE task (RFC-0006) is one whose lifecycle_state is 'tentative' or 'stable'; "
        "use 'stable'",
}


class OutOfRangeTime:
    """A time Arrow holds but Python cannot: DuckDB's 'infinity', or a year past 9999."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _instant(where: _Where, field: str, value: object) -> datetime:
    if isinstance(value, OutOfRangeTime) or (
            isinstance(value, str) and value.strip().lower() in ("infinity", "-infinity")):
        raise where.fail(field, value, "must be a time in years 1 to 9999",
                         "pass a time inside that range (NULL for an open end)")
    try:
        if isinstance(value, datetime):
            if getattr(value, "nanosecond", 0):  # a pandas Timestamp finer than TIMESTAMPTZ
                raise where.fail(field, value, "has nanoseconds; candidates keep microseconds "
                                 "(as TIMESTAMPTZ does)", f"round it, e.g. df[{field!r}]"
                                 ".dt.floor('us')")
            return as_utc(value)
        if isinstance(value, date):
            return datetime(value.year, value.month, value.day)
        if isinstance(value, str):
            if finer_than_microseconds(value):
                raise where.fail(field, value, "has digits finer than microseconds; "
                                 "candidates keep microseconds (as TIMESTAMPTZ does)",
                                 "round it first, for example CAST(t AS TIMESTAMPTZ) in SQL")
            try:
                return as_utc(datetime.fromisoformat(value.strip().replace("Z", "+00:00")))
            except ValueError:
                if _OUTSIDE_YEARS_TEXT.search(value):
                    raise where.fail(field, value, "must be a time in years 1 to 9999",
                                     "pass a time inside that range (NULL for an open end)"
                                     ) from None
    except OverflowError:
        # '0001-01-01T00:00:00+05:00' is a valid text, but its UTC instant is before year 1.
        raise where.fail(field, value, "must be a time whose UTC instant falls in years 1 to "
                         "9999", "pass a time at least a day inside that range") from None
    raise where.fail(field, value, "must be a timestamp",
                     "pass a TIMESTAMPTZ or ISO-8601 text such as '2026-09-14T00:00:00+00:00'")


# How DuckDB writes a DATE or TIMESTAMP outside years 1 to 9999 as text (pack_context in SQL
# hands times over as text): a five-digit year, or a date followed by ' (BC)'.
_OUTSIDE_YEARS_TEXT = re.compile(r"^\s*(?:\d{5,}-\d\d-\d\d|\d{4}-\d\d-\d\d \(BC\))")
_SUBMICRO_DIGITS = re.compile(r"[.,]\d{6}(\d+)")


def finer_than_microseconds(text: str) -> bool:
    """ISO text with more than six fractional digits that are not all zeros (a TIMESTAMP_NS
    cast to text): fromisoformat() would drop them without a word."""
    if "." not in text and "," not in text:  # most times: no fraction at all
        return False
    match = _SUBMICRO_DIGITS.search(text)
    return match is not None and match.group(1).strip("0") != ""


def _sequence(where: _Where, field: str, value: object) -> list[Any]:
    if type(value) is list or type(value) is tuple:
        return [v for v in value if v is not None]
    if isinstance(value, (str, bytes)) or not isinstance(value, Iterable):
        raise where.fail(field, value, "must be a list", "pass a VARCHAR[] list")
    return [v for v in value if v is not None]


def _path_count(where: _Where, value: object, paths: tuple[str, ...]) -> int | None:
    if value is None:
        return None  # derived from paths when packing (see selection.path_count)
    count = _whole(where, "path_count", value)
    if count < 0:
        raise where.fail("path_count", value, "must be >= 0", "count the retrieval paths")
    return count


def _whole(where: _Where, field: str, value: object) -> int:
    if _is_nan(value):
        raise where.fail(field, value, "must be a whole number", _nan_fix(required=False))
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    elif isinstance(value, decimal.Decimal) and value.is_finite() and value == int(value):
        value = int(value)  # a DECIMAL or HUGEINT column
    elif isinstance(value, numbers.Integral) and not isinstance(value, (bool, int)):
        value = int(value)  # numpy and other integer types (np.int64 from a DataFrame row)
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.fail(field, value, "must be a whole number", "cast it to INTEGER")
    if not INT32_MIN <= value <= INT32_MAX:
        # The 32-bit range at every entry point: rms_nodes and files of earlier releases
        # hold these fields as INTEGER.
        raise where.fail(field, value, f"must be in {INT32_MIN:,}..{INT32_MAX:,} (a 32-bit "
                         "INTEGER)", "pass a number in that range")
    return value


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _is_nan(value: object) -> bool:
    """A NaN of any number type: float, numpy's, Decimal('NaN')."""
    if isinstance(value, decimal.Decimal):
        return value.is_nan()
    return isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral) \
        and value != value


def _nan_fix(required: bool) -> str:
    """The fix for a NaN in a number field, worded alike on every path."""
    return ("NaN is no number: drop the row or give it a score in [0, 1]" if required
            else "NaN is no number: pass NULL (None in Python) where there is no value")


def _flag(where: _Where, field: str, value: object) -> bool:
    if isinstance(value, bool):
        return value
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(value, numpy.bool_):  # from a DataFrame row
        return bool(value)
    raise where.fail(field, value, "must be true or false", "cast it to BOOLEAN")


def _structured(where: _Where, value: object) -> str:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except RecursionError:
            raise where.fail("structured_value", _clip_nested(value),
                             "is nested too deeply to read",
                             "store a flatter JSON value (at most a few hundred levels)") from None
        except ValueError:
            raise where.fail("structured_value", value, "must be JSON", _JSON_FIX) from None
    try:
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                          default=str)
    except RecursionError:
        raise where.fail("structured_value", _clip_nested(value), "is nested too deeply to read",
                         "store a flatter JSON value (at most a few hundred levels)") from None
    except (TypeError, ValueError):
        raise where.fail("structured_value", value, "must be JSON-serialisable",
                         _JSON_FIX) from None


_JSON_FIX = "store JSON text (in SQL: to_json(value)), or a dict or list in Python"


def _clip_nested(value: object) -> str:
    """A short stand-in for a value too deep to repr()."""
    text = value if isinstance(value, str) else f"<{type(value).__name__}>"
    return text if len(text) <= 40 else text[:40] + "..."


def _condition(where: _Where, value: object) -> str:
    """A conditional record's condition state: printed in reader tags, so a closed set."""
    text = str(value).strip().lower()
    if text not in CONDITION_STATES:
        raise where.fail("condition_state", value, f"must be one of {', '.join(CONDITION_STATES)}",
                         "store whether the condition holds as true, false or unknown")
    return text

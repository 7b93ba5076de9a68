"""Columnar intake: validate candidate rows as Arrow columns, build Candidates without dicts.

candidates.to_candidate() checks one Python dict at a time. Here each field is checked for a
whole column at once (pyarrow.compute), and a row whose every field is already in its final
form becomes a Candidate straight from the column values. Any other row (a NULL id, a score
out of range, an upper-case UUID, an id list, a JSON value, a type this module does not
know) is handed back as its plain dict, for to_candidates() to normalise or reject with the
usual message naming the row, field, value and fix. So the two paths accept the same rows,
produce equal Candidates, and raise the same first error (tests/test_fast_paths.py).

pyarrow is imported inside the functions: the core stays importable without it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from .candidates import (
    _ENUM_VALUES,
    _SLOTS,
    INT32_MAX,
    INT32_MIN,
    OutOfRangeTime,
    _instant,
    _Where,
    builder_env,
    finer_than_microseconds,
)
from .errors import CandidateError, renames_for
from .records import CONDITION_STATES, Candidate
from .timefmt import as_utc

Row = Candidate | dict[str, Any] | None

_CANONICAL_UUID = r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
# An id kept verbatim by _node_id: not 36 long, and (a conservative subset of "no padding")
# it starts and ends with printable ASCII other than a space.
_PLAIN_EDGES = r"^[!-~]((?s).*[!-~])?$"
_FLOATS = ("score", "salience", "confidence")
_INTS = ("session_position", "token_cost_estimate")
_REQUIRED = ("id", "score", "content")
_FIELD_NAMES = frozenset(name for name, _ in _SLOTS)
_LOWER_FIELDS = {name.lower(): name for name in _FIELD_NAMES}
_LISTS = ("paths", "evidence_ids", "contradicts")
_AS_IS_TEXTS = ("content", "namespace_id", "session_id", "prose")


def intake(structs: Any) -> list[Row]:
    """One entry per row of a StructArray (or Table / RecordBatch) of candidate fields: a
    Candidate when the row is valid as it stands, else the row's dict (or None)."""
    import pyarrow as pa

    if isinstance(structs, (pa.Table, pa.RecordBatch)):
        table = structs if isinstance(structs, pa.Table) else pa.Table.from_batches([structs])
        table = table.combine_chunks()
        arrays = [column.chunk(0) if column.num_chunks else pa.array([], column.type)
                  for column in table.columns]
        if not arrays:
            return [{} for _ in range(table.num_rows)]
        structs = pa.StructArray.from_arrays(arrays, names=table.column_names)
    n = len(structs)
    if n == 0:
        return []
    check_columns([field.name for field in structs.type])
    structs = canonical_names(structs)
    fast = _valid_rows(structs)
    columns = _columns(structs)
    bad_times = _convert_times(columns)
    present = tuple(name for name, _ in _SLOTS if name in columns)
    build = _row_builder(present)
    return build(n, [columns[name] for name in present], fast.to_pylist(), bad_times, structs)


def candidate_field(name: str, *, exact: bool = False) -> str | None:
    """The candidate field a column feeds: its name matched without regard to case, as
    DuckDB's STRUCT cast matches pack_context's fields (a ranking query's ID, Score and
    CONTENT, a DataFrame's Id column), or only as spelled when `exact`; None for any other
    column."""
    if name in _FIELD_NAMES:
        return name
    if exact or not name.isascii():  # ASCII case only, as DuckDB folds identifiers
        return None
    return _LOWER_FIELDS.get(name.lower())


def check_columns(names: list[str], *, exact: Collection[str] = ()) -> None:
    """A table or query without an id, score or content column is refused as a whole:
    otherwise its first row's error (field 'id' is required, got None) hides the cause.
    So is one with two columns of one candidate field (SELECT *, 1 - score AS score, or
    score beside Score): which of them is meant cannot be told, and SQL's subquery would
    keep the first. Names in `exact` (pack_batches' group keys) feed a field only when
    spelled exactly like it."""
    feeding: dict[str, list[str]] = {}
    for name in names:
        field = candidate_field(name, exact=name in exact)
        if field is not None:
            feeding.setdefault(field, []).append(name)
    twice = sorted(field for field, columns in feeding.items() if len(columns) > 1)
    if twice:
        columns = feeding[twice[0]]
        given = ", ".join(repr(n) for n in names[:20])
        if len(set(columns)) == 1:
            raise CandidateError(
                f"the candidate rows have {len(columns)} columns named {twice[0]!r} (columns "
                f"given: {given}); give each column its own name, for example SELECT * "
                f"EXCLUDE ({columns[0]}), ... AS {twice[0]}")
        other = next(c for c in columns if c != twice[0])
        raise CandidateError(
            f"the candidate rows have columns {', '.join(repr(c) for c in columns)} for field "
            f"{twice[0]!r} (names match the fields without regard to case, as in SQL; "
            f"columns given: {given}); keep one: rename or drop the other, for example "
            f"df.rename(columns={{{other!r}: 'node_{twice[0].lower()}'}}) or SELECT * "
            f'EXCLUDE ("{other}")')
    missing = [name for name in _REQUIRED if name not in feeding]
    if not missing:
        return
    quoted = [repr(m) for m in missing]
    lacking = (f"column {quoted[0]}" if len(quoted) == 1
               else f"columns {', '.join(quoted[:-1])} and {quoted[-1]}")
    given = ", ".join(repr(n) for n in names[:20]) + (", ..." if len(names) > 20 else "")
    keys = [(name, candidate_field(name)) for name in names
            if name in exact and candidate_field(name) in missing]
    renames = " and ".join(f"{name!r} to {field!r}" for name, field in keys)
    others = {name.lower(): name for name in names
              if candidate_field(name, exact=name in exact) is None and name not in exact}
    typos, absent = renames_for(missing, others)
    raise CandidateError(
        f"the candidate rows lack the {lacking} (columns given: {given or 'none'}); every "
        "candidate needs id, score and content: "
        + (f"a group key feeds a field only when named exactly, so rename {renames} (or "
           "group by a copy under another name); otherwise " if keys else "")
        + (f"rename {' and '.join(typos)}"
           + (f", and select {' and '.join(absent)} too" if absent else "")
           if typos and not keys else
           "select them under those names, for example SELECT node_id AS id, similarity AS "
           "score, body AS content"))


def canonical_names(structs: Any) -> Any:
    """The StructArray with each field that feeds a candidate field renamed to it (Id to
    id), after check_columns(); the same array when every name is already canonical."""
    import pyarrow as pa

    names = [field.name for field in structs.type]
    renamed = [candidate_field(name) or name for name in names]
    if renamed == names:
        return structs
    return pa.StructArray.from_arrays([structs.field(i) for i in range(len(names))],
                                      names=renamed, mask=structs.is_null())


@lru_cache(maxsize=64)
def _row_builder(present: tuple[str, ...]) -> Callable[..., list[Row]]:
    """The row loop of intake(), written out for one set of present fields.

    Each field is set by its own statement (a NULL in a present column takes the default;
    an absent field its default): a generic loop over (setter, default) pairs spent about
    as long on its own iteration as on setting the slots. Rows the column checks did not
    accept, or holding a time to_candidate() rejects, are handed back as their dicts.
    """
    env: dict[str, Any] = {**builder_env(), "readable_row": readable_row}
    values = [f"v{i}" for i, (name, _) in enumerate(_SLOTS) if name in present]
    body = []
    for i, (name, _) in enumerate(_SLOTS):
        value = f"default{i} if v{i} is None else v{i}" if name in present else f"default{i}"
        body.append(f"        obj.{name} = {value}")
    source = "\n".join([
        "def build(n, columns, fast, bad_times, structs):",
        "    out = []",
        "    append = out.append",
        # range(n) leads: with no present column the loop still visits every row.
        f"    for row, {''.join(v + ', ' for v in values)}in zip(range(n), *columns):",
        "        if not fast[row] or row in bad_times:",
        "            append(readable_row(structs, row))",
        "            continue",
        "        obj = new(Unfrozen)",
        *body,
        "        obj.__class__ = Candidate",
        "        append(obj)",
        "    return out",
    ])
    exec(compile(source, f"<intake row builder {present}>", "exec"), env)  # noqa: S102
    return env["build"]


def _valid_rows(structs) -> Any:
    """A boolean mask: True where every field of the row is already final (see module doc)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    mask = structs.is_valid()
    fields = {structs.type.field(i).name: structs.field(i) for i in range(structs.type.num_fields)}
    for name in _REQUIRED:
        if name not in fields:
            return pa.array([False] * len(structs))
    for name, column in fields.items():
        if name not in _KNOWN or (column.null_count == len(column) and name not in _REQUIRED):
            continue
        ok = _field_ok(name, column)
        if ok is not None:
            mask = pc.and_kleene(mask, pc.fill_null(ok, False))
    return pc.fill_null(mask, False)


def _field_ok(name: str, column) -> Any:
    """Per row: the field is NULL where NULL is allowed, or a value to_candidate keeps as is.
    None when that holds for every row whatever its value (a text kept as it is, a time, a
    flag, a path list, each of which may be NULL): no kernel is run for such a column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    null_ok = name not in ("id", "score", "content")
    if null_ok and _any_value_kept(name, kind):
        return None
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        if name in ("id", "superseded_by"):
            ok = pc.match_substring_regex(column, _CANONICAL_UUID)
            if ok.true_count != len(column):
                # Not every id is a canonical UUID: the others are kept when plain.
                ok = pc.or_(ok, pc.and_(pc.not_equal(pc.utf8_length(column), 36),
                                        pc.match_substring_regex(column, _PLAIN_EDGES)))
        elif name in _ENUM_VALUES:
            ok = pc.is_in(column, value_set=pa.array(list(_ENUM_VALUES[name]), kind))
        elif name == "condition_state":
            ok = pc.is_in(column, value_set=pa.array(list(CONDITION_STATES), kind))
        elif name in _AS_IS_TEXTS or name in _TIMES or name == "speaker":
            ok = pc.is_valid(column)
        else:
            ok = pa.array([False] * len(column))  # structured_value: parsed and re-dumped
    elif name in _TIMES and (pa.types.is_timestamp(kind) or pa.types.is_date(kind)):
        ok = pc.is_valid(column)  # converted to UTC per value, as to_candidate does
    elif name in _FLOATS and pa.types.is_float64(kind):
        ok = pc.and_(pc.greater_equal(column, 0.0), pc.less_equal(column, 1.0))
    elif name in _INTS and pa.types.is_integer(kind):
        ok = _in_int32(column, INT32_MIN)
    elif name == "path_count" and pa.types.is_integer(kind):
        ok = _in_int32(column, 0)
    elif name == "pinned" and pa.types.is_boolean(kind):
        ok = pc.is_valid(column)
    elif name in _LISTS and pa.types.is_list(kind) and pa.types.is_string(kind.value_type):
        if name == "paths":
            ok = pc.is_valid(column)
        else:  # evidence_ids, contradicts: each id is checked row by row, unless none
            ok = pc.equal(pc.list_value_length(column), 0)
    else:
        ok = pa.array([False] * len(column))  # id lists and any other type: row by row
    ok = pc.fill_null(ok, False)
    return pc.or_(ok, pc.is_null(column)) if null_ok else ok


def _any_value_kept(name: str, kind: Any) -> bool:
    """A column of this field and type whose every value (or NULL) to_candidate keeps as is,
    exactly where _field_ok's test is pc.is_valid on a field that may be NULL."""
    import pyarrow as pa

    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return name in _AS_IS_TEXTS or name in _TIMES or name == "speaker"
    return ((name in _TIMES and (pa.types.is_timestamp(kind) or pa.types.is_date(kind)))
            or (name == "pinned" and pa.types.is_boolean(kind))
            or (name == "paths" and pa.types.is_list(kind)
                and pa.types.is_string(kind.value_type)))


def _in_int32(column: Any, low: int) -> Any:
    """low <= value <= INT32_MAX, compared as doubles (exact at these bounds), so unsigned
    and 64-bit columns compare without an overflow."""
    import pyarrow as pa
    import pyarrow.compute as pc

    # Unsafe: a 64-bit value past 2**53 rounds, still far outside the 32-bit bounds.
    as_double = pc.cast(column, pa.float64(), safe=False)
    return pc.and_(pc.greater_equal(as_double, float(low)),
                   pc.less_equal(as_double, float(INT32_MAX)))


_TIMES = ("event_time", "valid_from", "valid_to")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_KNOWN = frozenset(name for name, _ in _SLOTS)


def _columns(structs) -> dict[str, list[Any]]:
    """The final Python values of each field that is not NULL in every row."""
    import pyarrow as pa

    out: dict[str, list[Any]] = {}
    for i in range(structs.type.num_fields):
        name = structs.type.field(i).name
        column = structs.field(i)
        if name not in _KNOWN or column.null_count == len(column):
            continue
        kind = column.type
        if name in _TIMES and pa.types.is_timestamp(kind) and kind.tz and kind.unit != "ns":
            # Aware instants as microseconds since the epoch: datetimes in UTC built
            # directly, the values to_candidate's as_utc() gives, without a zone lookup.
            try:
                micros = column.cast(pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
                out[name] = [None if v is None else _EPOCH + timedelta(microseconds=v)
                             for v in micros]
                continue
            except (OverflowError, pa.ArrowInvalid):
                pass  # 'infinity' or a year past 9999: value by value below
        try:
            values = column.to_pylist()
        except OverflowError:
            values = [readable(column[i]) for i in range(len(column))]
        convert = _CONVERT.get(name)
        if convert is not None:
            values = convert(values)
        out[name] = values
    return out


def _enum_converter(name: str) -> Callable[[list[Any]], list[Any]]:
    members = _ENUM_VALUES[name]

    def convert(values: list[Any]) -> list[Any]:
        return [None if v is None else members.get(v) for v in values]

    return convert


def _paths(values: list[Any]) -> list[Any]:
    # A column of another type (a float NaN for a missing list) is not taken from the
    # columns: its rows go to the row checks, which read or refuse each value. A list
    # without NULLs (nearly all) becomes its tuple directly, at a third of the cost.
    return [(tuple(v) if None not in v else tuple([p for p in v if p is not None]))
            if type(v) is list else v for v in values]


def _speaker(values: list[Any]) -> list[Any]:
    return [None if v is None else (str(v).strip() or None) for v in values]


_CONVERT: dict[str, Callable[[list[Any]], list[Any]]] = {
    **{name: _enum_converter(name) for name in _ENUM_VALUES},
    "paths": _paths,
    "evidence_ids": _paths,  # only empty lists are taken from the columns
    "contradicts": _paths,
    "speaker": _speaker,
}


def _convert_times(columns: dict[str, list[Any]]) -> set[int]:
    """Turn the time columns' values into UTC datetimes in place, as to_candidate does;
    return the rows holding a time it would reject (those rows go row by row)."""
    bad: set[int] = set()
    for name in _TIMES:
        values = columns.get(name)
        if values is None:
            continue
        for row, value in enumerate(values):
            if value is None or (type(value) is datetime and value.tzinfo is UTC):
                continue
            if type(value) is str and "Z" not in value and not finer_than_microseconds(value):
                # SQL hands times over as text ('2023-01-05 12:34:00+00'). Without a 'Z',
                # _instant() parses the text as it is (fromisoformat() refuses surrounding
                # spaces, which strip() would remove), so skip its steps; anything that fails
                # here, an out-of-range offset included, goes the row checks' way below.
                try:
                    parsed = datetime.fromisoformat(value)
                    # DuckDB's '+00' parses to the UTC singleton, already what as_utc gives.
                    values[row] = parsed if parsed.tzinfo is UTC else as_utc(parsed)
                    continue
                except Exception:  # noqa: BLE001, S112 - the path below reports it
                    pass
            try:
                values[row] = _instant(_Where(row, None), name, value)
            except Exception:  # noqa: BLE001 - to_candidate() raises it, in row order
                bad.add(row)
    return bad


def readable(scalar: Any) -> Any:
    """scalar.as_py(), or an OutOfRangeTime (which the row checks reject, naming the row and
    field) for a value Python cannot hold: DuckDB's 'infinity' time, a year past 9999."""
    import pyarrow as pa

    try:
        return scalar.as_py()
    except OverflowError:
        # A DATE is 32 bits (days), which Arrow casts to int32 but not to int64.
        bits = 32 if pa.types.is_date32(scalar.type) else 64
        raw = scalar.cast(pa.int32() if bits == 32 else pa.int64()).as_py()
        # DuckDB stores 'infinity' and '-infinity' as the extreme values of their width.
        name = {2**(bits - 1) - 1: "infinity", -(2**(bits - 1)) + 1: "-infinity"}.get(raw)
        return OutOfRangeTime(repr(name) if name else f"{scalar.type} value {raw}")


def readable_row(structs: Any, row: int) -> dict[str, Any] | None:
    """One row as a dict, as StructArray.as_py() gives it, with readable() values."""
    try:
        return structs[row].as_py()
    except OverflowError:
        names = [structs.type.field(i).name for i in range(structs.type.num_fields)]
        return {name: readable(structs.field(i)[row]) for i, name in enumerate(names)}


def plain_types(table: Any) -> Any:
    """`table` with Arrow's view types cast to the plain ones: polars hands text over as
    string_view, which pyarrow can neither sort nor take, and which the column checks
    above do not read. Text becomes large_string (no 2 GiB limit per chunk), bytes
    large_binary, at any depth (a VARCHAR[] of paths too). Other tables pass as they are."""
    import pyarrow as pa

    schema = table.schema
    plain = pa.schema([field.with_type(plain_type(field.type)) for field in schema],
                      metadata=schema.metadata)
    return table if plain.equals(schema) else table.cast(plain)


def plain_type(kind: Any) -> Any:
    import pyarrow as pa

    if pa.types.is_string_view(kind):
        return pa.large_string()
    if pa.types.is_binary_view(kind):
        return pa.large_binary()
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_list_view(kind) \
            or pa.types.is_large_list_view(kind):
        value = kind.value_field
        inner = value.with_type(plain_type(value.type))
        return pa.large_list(inner) if pa.types.is_large_list(kind) or \
            pa.types.is_large_list_view(kind) else pa.list_(inner)
    if pa.types.is_struct(kind):
        return pa.struct([field.with_type(plain_type(field.type)) for field in kind])
    return kind

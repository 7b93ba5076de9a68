"""Many bundles at once, Arrow in and Arrow out: the one packing path every engine shares.

pack_lists() packs a column of candidate lists, one bundle per row. DuckDB's pack_context()
calls it on each vector of a GROUP BY; pack_batches() calls it on the groups of an Arrow
table, as Dask, Spark and Ray workers do. Packing is pure (no clock, no randomness), so the
same candidates, budget and config give the same bytes on any engine, in any process.

Like the rest of the core it imports pyarrow only inside its functions, so importing
rms_duck.packing loads no pyarrow.
"""

from __future__ import annotations

import os
import re
import sys
import threading
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from ..bundle import MemoryBundle
from ..candidates import CheckedCandidates, to_candidates
from ..columnar import Row, candidate_field, check_columns, intake, plain_type, plain_types
from ..config import PackingConfig, check_flag, parse_config
from ..errors import CandidateError, ConfigError, RmsError
from ..receipts import inputs_json
from ..records import Candidate
from ..tokens.bulk import check_count, default_processes, warm_counter
from ..tokens.costfile import LineCosts
from ..tokens.counter import LineCounter
from .arrowtype import (
    BUNDLE_FIELDS,
    INPUTS_COLUMN,
    bundle_array,
    bundle_arrow_type,
    inputs_field,
)
from .forecast import frame_lines, likely_lines
from .gcpause import gc_paused
from .parallel import pack_in_parts
from .pipeline import _check_budget, pack_candidates

if TYPE_CHECKING:
    import pyarrow as pa

# Bundles packed (and turned into Arrow) at a time, so Python holds one slice's rows and
# bundles at once however many groups a call packs.
SLICE_BUNDLES = 512
# Content characters in one slice above which its lines are costed in bulk, in parallel:
# about 100K tokens, where a second process saves more than the hand-off costs.
BATCH_THRESHOLD_CHARS = 400_000
# Bundles whose forecast lines are looked up before a slice's whole forecast is made: when
# the counter holds all of theirs, the slice was packed before and the forecast is skipped.
FORECAST_PROBE = 16

LineCostSource = LineCosts | str | os.PathLike[str] | None


def pack_batches(table: Any, *, by: str | Sequence[str], budget: int,
                 config: PackingConfig | dict[str, Any] | str | None = None,
                 line_costs: LineCostSource = None, inputs: bool = False,
                 processes: int | None = None) -> pa.Table:
    """Pack one bundle per group of candidate rows.

    Args:
        table: candidate rows, one per row: a pyarrow Table or RecordBatch, or anything
            pa.table() reads (pandas, polars, an __arrow_c_stream__ source). Columns named
            like candidate fields (id, score, content, event_time, ...) are the candidate;
            other columns are ignored.
        by: the group key column(s).
        budget: the context budget of every bundle, in tokens, overhead included.
        config: PackingConfig fields (object, dict or JSON text), the same for every group.
        line_costs: exact line costs exported from a store (rms_duck.export_line_costs),
            as a LineCosts or a Parquet path; the lines they cover are not re-tokenized.
        inputs: also return an `inputs` column, the validated candidates as canonical JSON
            (what rms_duck.store_batches() stores beside each bundle for replay).
        processes: processes for bulk line costing; None uses every core, 1 stays in this
            process (the right choice inside a cluster worker).

    Returns:
        One row per group, sorted by the key: the key column(s), then pack_context()'s
        bundle fields (context, tokens_used, ..., receipt) as columns.

    Raises:
        CandidateError, ConfigError, EncodingUnavailableError: bad input; nothing is packed.
    """
    import pyarrow as pa

    keys = _key_names(by)
    check_flag("inputs", inputs, "pass inputs=True to add the inputs column store_batches "
               "needs")
    check_count("processes", processes, "pass None for every core, or 1 to stay in this "
                "process")
    data = as_table(table, candidates=keys)
    budget = _check_budget(budget)
    config = parse_config(config)
    costs = _line_costs(line_costs, config)
    _check_columns(data, keys)
    data = _decoded_keys(data, keys)
    key_table, lists = group_lists(data, keys)
    try:
        bundles = pack_lists(lists, [budget] * len(lists), [config] * len(lists),
                             line_costs=costs, inputs=inputs, processes=processes)
    except RmsError as exc:
        raise in_keyed_group(exc, key_table) from exc.__cause__
    columns = list(key_table.columns) + bundles.flatten()
    names = list(keys) + [field.name for field in bundles.type]
    return pa.table(columns, names=names)


def output_schema(key_fields: Sequence[pa.Field], *, inputs: bool = False) -> pa.Schema:
    """The schema pack_batches() returns for these key fields (for engines that need it
    before any data, such as Spark's applyInArrow)."""
    import pyarrow as pa

    given: Any = [key_fields] if isinstance(key_fields, pa.Field) else key_fields
    if isinstance(given, Iterable) and not isinstance(given, (str, bytes)):
        given = list(given)  # read once: a generator checked below would be empty after
    wrong = ([given] if not isinstance(given, list)
             else [field for field in given if not isinstance(field, pa.Field)])
    if wrong:
        # A column name failed in pyarrow: "Cannot convert str to pyarrow.lib.Field".
        raise ConfigError(
            f"output_schema key_fields must be pyarrow fields (each key column's name and "
            f"type), got {wrong[0]!r}; pass for example [pa.field('q', pa.int64())], or "
            "table.schema.field('q') of the candidates table")
    fields = list(given) + list(bundle_arrow_type())
    return pa.schema(fields + [inputs_field()] if inputs else fields)


def group_lists(data: pa.Table, keys: Sequence[str]) -> tuple[pa.Table, pa.Array]:
    """(one row per distinct key, sorted; the candidate STRUCTs of each group as a LIST).

    Rows are ordered by key with a stable sort; NULL keys form one group, last.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    order = pc.sort_indices(data, sort_keys=[(k, "ascending", "at_end") for k in keys])
    data = data.take(order)
    starts = _group_starts(data, keys)
    key_table = data.select(list(keys)).take(pa.array(starts, pa.int64()))
    # Columns match candidate fields without regard to case, as in SQL (check_columns).
    # A group key feeds a field only when spelled exactly so (by='Type' stays a key alone).
    pairs = [(name, field) for name in data.column_names
             if (field := candidate_field(name, exact=name in keys)) is not None]
    names, fields = [name for name, _ in pairs], [field for _, field in pairs]
    if len(data):
        values = pa.StructArray.from_arrays(
            [_candidate_column(data, name, keys) for name in names], names=fields)
    else:
        values = pa.array([], pa.struct([(field, data.schema.field(name).type)
                                         for name, field in zip(names, fields, strict=True)]))
    offsets = starts + [len(data)]
    list_type = pa.int64() if len(data) >= 2**31 else pa.int32()
    array_type = pa.LargeListArray if list_type == pa.int64() else pa.ListArray
    return key_table, array_type.from_arrays(pa.array(offsets, list_type), values)


def pack_lists(candidates: pa.Array | pa.ChunkedArray, budgets: Sequence[Any],
               configs: Sequence[Any], *, line_costs: LineCosts | None = None,
               inputs: bool = False, processes: int | None = None) -> pa.StructArray:
    """One bundle per row of a LIST<STRUCT> candidate column, as bundle_arrow_type().

    Packed in slices of SLICE_BUNDLES. Before a slice packs, its candidates are validated,
    the lines it will likely need are looked up in `line_costs` and, when the slice is
    large, costed together across processes (bulk.py); the packs then find them counted.
    The bundles are the same either way. configs may be PackingConfig objects, JSON text
    or None (the defaults); a bad budget, config or candidate raises in row order.
    """
    import pyarrow as pa

    if isinstance(candidates, pa.Array):
        candidates = pa.chunked_array([candidates])
    if processes != 1 and line_costs is None:
        shared = pack_in_parts(candidates, budgets, configs, inputs=inputs,
                               processes=processes or default_processes())
        if shared is not None:
            return shared
    out_type = pa.struct(list(bundle_arrow_type()) + [inputs_field()]) if inputs \
        else bundle_arrow_type()
    parsed: dict[Any, PackingConfig] = {}
    counters: dict[str, LineCounter] = {}
    chunks = []
    for start in range(0, len(candidates), SLICE_BUNDLES):
        # Once a slice: re-enabling the collector after every small pack cost 10%. The
        # slice's rows and bundles are dropped inside the pause, so the young collection
        # that follows it finds only the Arrow chunk, not thousands of records to scan.
        with gc_paused():
            chunks.append(_slice_array(candidates.slice(start, SLICE_BUNDLES),
                                       budgets[start:start + SLICE_BUNDLES],
                                       configs[start:start + SLICE_BUNDLES], start, parsed,
                                       counters, line_costs, inputs, processes))
    if not chunks:
        return pa.array([], type=out_type)
    return pa.concat_arrays(chunks)


def _slice_array(candidates: pa.ChunkedArray, budgets: Sequence[Any], configs: Sequence[Any],
                 start: int, parsed: dict[Any, PackingConfig], counters: dict[str, LineCounter],
                 line_costs: LineCosts | None, inputs: bool,
                 processes: int | None) -> pa.StructArray:
    """One slice's bundles (rows start, start + 1, ...) as an Arrow array."""
    jobs = []
    for rows, budget, raw in zip(candidate_rows(candidates), budgets, configs, strict=True):
        try:
            jobs.append([rows or [], budget, _config(parsed, raw)])
        except RmsError as exc:
            raise in_group(exc, rows, start + len(jobs)) from exc.__cause__
    ready = _prepare(jobs, counters, line_costs, processes)
    bundles, texts = _pack_slice(jobs, ready, counters, inputs, start)
    return bundle_array(bundles, texts)


def _pack_slice(jobs: list[list[Any]], ready: int, counters: dict[str, LineCounter],
                inputs: bool, start: int) -> tuple[list[MemoryBundle], list[str] | None]:
    """The bundles of one slice's jobs (rows start, start + 1, ...), packed in order, and
    with `inputs` their inputs' canonical JSON."""
    bundles = []
    texts: list[str] | None = [] if inputs else None
    for i, (rows, budget, config) in enumerate(jobs):
        # A row not ready gets no counter: pack_candidates then reports its error.
        counter = _counter(counters, config.encoding) if i < ready else None
        try:
            bundle = pack_in_turn(rows, budget=budget, config=config, counter=counter)
        except RmsError as exc:
            raise in_group(exc, rows, start + i) from exc.__cause__
        bundles.append(bundle)
        if texts is not None:
            texts.append(inputs_json(rows))  # validated by _prepare, or pack raised
    return bundles, texts


def pack_in_turn(rows: Sequence[Any], *, budget: Any, config: PackingConfig,
                 counter: LineCounter | None = None) -> MemoryBundle:
    """pack_candidates() holding the packing lock: one thread packs one bundle at a time.

    The packer is Python, so threads packing at once (DuckDB's UDF threads, a caller's own)
    only take turns for the GIL. Taking turns per bundle instead keeps them from trading
    the GIL inside a pack, and a small pack from another connection waits for one bundle,
    not for a whole GROUP BY (a lock per call made it wait seconds: performance.md, round 8).
    """
    with _PACK_LOCK[0]:
        return pack_candidates(rows, budget=budget, config=config, counter=counter)


# In a list so that a forked child can be given a fresh lock: a fork taken while another
# thread packs would otherwise leave the child's copy locked for ever.
_PACK_LOCK = [threading.Lock()]
if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=lambda: _PACK_LOCK.__setitem__(0, threading.Lock()))


def in_group(exc: RmsError, rows: Sequence[Any] | None,
             row: int | None = None) -> RmsError:
    """`exc` saying which candidate list it came from. A GROUP BY gives a list no name of its
    own, so the list is named by its smallest id (or as NULL or empty). Not by its first:
    list() keeps the order the threads produced, so one query failed naming 'id1' on one
    run and 'id122881' on the next.

    `row`, the list's row in pack_lists(), travels on the error (as `group_row`, with the
    name given as `group_where`) for pack_batches() to name the group by its key."""
    if rows is None:
        where = "a NULL candidate list"
    elif not rows:
        where = "an empty candidate list"
    else:
        ids = [str(i) for i in map(_row_id, rows) if i is not None]
        where = (f"the candidate list whose smallest id is {min(ids)!r}" if ids else
                 f"a candidate list of {len(rows)} whose candidates have no id")
    named = type(exc)(f"{exc} (in {where})")
    if row is not None:
        vars(named).update(group_row=row, group_where=where)
    return named


def in_keyed_group(exc: RmsError, key_table: pa.Table) -> RmsError:
    """An error of pack_lists() naming its group by key, as `q='a', day=1`: ids alone do not
    say which group failed, as one node is often a candidate of many queries."""
    row, where = vars(exc).get("group_row"), vars(exc).get("group_where")
    if row is None or where is None:
        return exc
    key = ", ".join(f"{k}={v!r}" for k, v in key_table.slice(row, 1).to_pylist()[0].items())
    return type(exc)(f"{str(exc).removesuffix(f' (in {where})')} (in the group {key}: {where})")


def _row_id(row: Any) -> Any:
    """A candidate row's id: a Candidate's, a dict's 'id', or None (a NULL row)."""
    return row.id if isinstance(row, Candidate) else (
        row.get("id") if isinstance(row, dict) else None)


def candidate_rows(candidates: pa.ChunkedArray) -> list[list[Row] | None]:
    """The LIST(STRUCT) column as one list per bundle, validated a column at a time.

    columnar.intake() turns each chunk's candidate structs into Candidates wherever a row is
    already valid, and leaves the others as dicts, which pack_candidates() checks (and
    rejects) row by row with the usual message, so errors name the same row and field.
    """
    out: list[list[Row] | None] = []
    for chunk in candidates.chunks:
        if len(chunk) == 0:
            continue
        base = chunk.offsets[0].as_py()
        structs = chunk.values.slice(base, chunk.offsets[-1].as_py() - base)
        rows = intake(structs)
        offsets = chunk.offsets.to_pylist()
        for lo, hi, valid in zip(offsets, offsets[1:], chunk.is_valid().to_pylist(), strict=False):
            out.append(rows[lo - base:hi - base] if valid else None)
    return out


def _config(parsed: dict[Any, PackingConfig], raw: Any) -> PackingConfig:
    if isinstance(raw, PackingConfig):
        return raw
    config = parsed.get(raw)
    if config is None:
        config = parsed[raw] = parse_config(raw)
    return config


def _prepare(jobs: list[list[Any]], counters: dict[str, LineCounter],
             line_costs: LineCosts | None, processes: int | None) -> int:
    """Validate the slice's candidates; give its counters the lines they will likely need,
    from `line_costs` and, for a large slice, from one bulk costing call.

    Returns how many leading rows are ready to pack (valid budget and candidates); the
    first row that is not will raise its error in the pack loop, in row order.
    """
    ready = 0
    for job in jobs:
        if not _whole(job[1]):
            break
        try:
            job[0] = CheckedCandidates(to_candidates(job[0]))
        except RmsError:
            break
        ready += 1
    chars = sum(len(c.content) for rows, _, _ in jobs[:ready] for c in rows)
    bulk = chars >= BATCH_THRESHOLD_CHARS and (processes or default_processes()) >= 2
    if line_costs is None and not bulk:
        return ready
    if _forecast_known(jobs[:min(ready, FORECAST_PROBE)], counters):
        # A slice this process has packed before: its first bundles' lines are all cached,
        # so forecasting the rest would render every line only to find it cached too.
        return ready
    lines: dict[str, list[str]] = {}
    for rows, budget, config in jobs[:ready]:
        if budget <= 0 or not rows:
            continue
        wanted = lines.setdefault(config.encoding, [])
        if line_costs is not None:
            wanted.extend(frame_lines(rows, config, budget))
        wanted.extend(likely_lines(rows, config, budget))
    for encoding, batch in lines.items():
        counter = _counter(counters, encoding)
        if line_costs is not None:
            line_costs.prime(counter, batch)
        if bulk:
            warm_counter(counter, batch, processes=processes)
    return ready


def _forecast_known(probe: list[list[Any]], counters: dict[str, LineCounter]) -> bool:
    """True when every line the first bundles of a slice will likely need is cached, and
    at least one of them has lines (a slice that opens with empty lists proves nothing).

    Only a forecast's speed depends on it: a line it misses is costed when the packer first
    needs it, and a cached cost is the exact cost of that exact line, so bundles are the
    same bytes either way (tests/test_bulk.py checks a warm and a cold slice). The frame
    lines a forecast loads from stored costs are left out: a pack costs them on demand,
    a handful per slice."""
    checked = False
    for rows, budget, config in probe:
        if budget <= 0 or not rows:
            continue
        if _counter(counters, config.encoding).unseen(likely_lines(rows, config, budget)):
            return False
        checked = True
    return checked


def _whole(budget: object) -> bool:
    return isinstance(budget, int) and not isinstance(budget, bool)


def _counter(counters: dict[str, LineCounter], encoding: str) -> LineCounter:
    """One counter per encoding for a whole call: it holds the costs loaded for it."""
    counter = counters.get(encoding)
    if counter is None:
        counter = counters[encoding] = LineCounter(encoding)
    return counter


def _key_names(by: str | Sequence[str]) -> tuple[str, ...]:
    # Any iterable of names (a list, a tuple, a DataFrame's columns), as before; None or
    # another non-iterable is the ConfigError below, not a bare TypeError.
    keys = (by,) if isinstance(by, str) else tuple(by) if isinstance(by, Iterable) else ()
    if not keys or not all(isinstance(k, str) and k for k in keys):
        raise ConfigError(f"by must name the group key column(s), got {by!r}; "
                          "for example by='q' or by=['session_id', 'turn']")
    twice = [k for k in keys if keys.count(k) > 1]
    if twice:
        # The result would hold two columns of that name, which nothing downstream can
        # tell apart (store_batches could not sort by it).
        raise ConfigError(f"by names the key column {twice[0]!r} twice; name it once, "
                          f"for example by={list(dict.fromkeys(keys))!r}")
    clash = [k for k in keys if k in BUNDLE_FIELDS or k == INPUTS_COLUMN]
    if clash:
        raise ConfigError(f"group key column {clash[0]!r} has the name of a bundle field; "
                          "rename it (for example to 'group_" + clash[0] + "')")
    return keys


def as_table(table: Any, *, candidates: Sequence[str] | None = None) -> pa.Table:
    """Arrow data of any kind as a pyarrow Table; a pandas index is dropped, never a column,
    and view types (polars' text) become plain ones (columnar.plain_types).

    With `candidates` (extra column names to keep, such as group keys) the table holds
    candidate rows, so a pandas column Arrow cannot convert that feeds no candidate field
    (an object column of ints and texts) is left out, as unknown fields are, instead of
    failing the whole conversion."""
    return plain_types(_any_table(table, candidates))


def lazy_frame_fix(data: Any, *, records: bool = False) -> str | None:
    """For a lazy frame, which holds no rows until it is computed (a polars LazyFrame, a
    Dask DataFrame): what it is and what to pass instead, a table or (`records`) the list of
    records pack_candidates takes. Both are called DataFrame-like names that the bare "got
    DataFrame" of the generic error left the caller to puzzle out."""
    kind, package = type(data).__name__, type(data).__module__.partition(".")[0]
    if package == "polars" and kind == "LazyFrame":
        if records:
            return ("a polars LazyFrame, which holds no rows until it is computed; pass "
                    "frame.collect().to_dicts()")
        return ("a polars LazyFrame, which holds no rows until it is collected; pass "
                "frame.collect()")
    if package == "dask" and hasattr(data, "npartitions") and hasattr(data, "compute"):
        groups = "pack its groups on the cluster with rms_duck.dask.pack_groups(ddf, by=..., " \
                 "budget=...)"
        if records:
            return (f"a Dask {kind}, which holds no rows until it is computed; pass "
                    f"ddf.compute().to_dict('records'), or {groups}")
        return (f"a Dask {kind}, which holds no rows until it is computed; {groups}, or pass "
                "ddf.compute() to pack it in this process")
    return None


def _any_table(table: Any, candidates: Sequence[str] | None) -> pa.Table:
    import pyarrow as pa

    if isinstance(table, pa.Table):
        return table
    lazy = lazy_frame_fix(table)
    if lazy is not None:
        raise CandidateError(f"table must be Arrow data, got {lazy}")
    if isinstance(table, pa.RecordBatch):
        return pa.Table.from_batches([table])
    pandas = sys.modules.get("pandas")
    if candidates is not None and pandas is not None and isinstance(table, pandas.DataFrame):
        _check_index_feeds_no_field(table, candidates)
        _check_no_repeated_field_column(table, candidates)
    try:
        if pandas is not None and isinstance(table, pandas.DataFrame):
            try:
                return pa.Table.from_pandas(table, preserve_index=False)
            except (TypeError, ValueError, pa.ArrowException):
                used = [name for name in table.columns if candidates is not None
                        and (name in candidates or (isinstance(name, str)
                                                    and candidate_field(name) is not None))]
                if candidates is None or len(used) == len(table.columns):
                    raise
                return pa.Table.from_pandas(table[used], preserve_index=False)
        return pa.table(table)
    except (TypeError, ValueError, pa.ArrowException) as exc:
        if pandas is not None and isinstance(table, pandas.DataFrame):
            # Arrow names the column ("Conversion failed for column speaker with type
            # object"): the fix names it too, not always 'content'.
            found = re.search(r"Conversion failed for column (.+?) with type", str(exc))
            column = repr(found.group(1)) if found else "'content'"
            raise CandidateError(
                f"a DataFrame column Arrow cannot convert ({exc}): its values must share one "
                f"type; convert it first, for example df[{column}] = "
                f"df[{column}].astype(str) for text, or pd.to_numeric(df[{column}]) for "
                "numbers") from None
        raise CandidateError(
            f"table must be Arrow data (a pyarrow Table, pandas or polars DataFrame, or an "
            f"__arrow_c_stream__ source), got {type(table).__name__} ({exc}); build one with "
            "pa.Table.from_pylist(rows)") from None


def _check_index_feeds_no_field(frame: Any, keys: Sequence[str]) -> None:
    """A pandas index is never read. One named for a required field or a group key
    (df.set_index("id")) would otherwise surface as "the candidate rows lack the column
    'id'", while the frame plainly shows an id: say that it is the index, and the fix."""
    fed = {candidate_field(c) for c in frame.columns if isinstance(c, str)}
    for name in frame.index.names:
        field = candidate_field(name) if isinstance(name, str) else None
        if (field in ("id", "score", "content") and field not in fed) or (
                name in keys and name not in frame.columns):
            raise CandidateError(
                f"the DataFrame's {field or name!r} is its index ({name!r}), and a pandas "
                "index is never read as a column; make it a column first: df.reset_index()")


def _check_no_repeated_field_column(frame: Any, keys: Sequence[str]) -> None:
    """pandas allows two columns of one name; Arrow refuses them, and the message for an
    unconvertible column ("its values must share one type ... astype(str)") was the wrong
    fix. A repeated name that feeds no candidate field or key is left out later, as before."""
    seen: set[str] = set()
    for name in frame.columns:
        used = isinstance(name, str) and (candidate_field(name) is not None or name in keys)
        if used and name in seen:
            given = ", ".join(repr(c) for c in list(frame.columns)[:20])
            raise CandidateError(
                f"the DataFrame has more than one column named {name!r} (columns given: "
                f"{given}); keep one: df = df.loc[:, ~df.columns.duplicated()], or rename "
                "the other")
        seen.add(name)


def _check_columns(data: pa.Table, keys: Sequence[str]) -> None:
    import pyarrow as pa

    names = data.column_names
    for key in keys:
        if names.count(key) > 1:
            raise ConfigError(f"group key column {key!r} appears {names.count(key)} times in "
                              "the table; give each column its own name")
        if key not in names:
            raise ConfigError(f"group key column {key!r} is not in the table (columns: "
                              f"{', '.join(names)}); pass by= one of those")
        if pa.types.is_nested(data.schema.field(key).type):
            raise ConfigError(f"group key column {key!r} has type "
                              f"{data.schema.field(key).type}; group by scalar columns")
    check_columns(names, exact=keys)


def _decoded_keys(data: pa.Table, keys: Sequence[str]) -> pa.Table:
    """Dictionary-encoded keys (pandas and polars categoricals) as their values: Arrow
    cannot sort a dictionary column, and DuckDB's GROUP BY groups them by value too."""
    import pyarrow as pa

    for key in keys:
        column = data.column(key)
        if pa.types.is_dictionary(column.type):
            # polars' categoricals hold string_view values, which Arrow cannot take from.
            value_type = plain_type(column.type.value_type)
            plain = pa.chunked_array(
                [chunk.dictionary.cast(value_type).take(chunk.indices)
                 for chunk in column.chunks], type=value_type)
            data = data.set_column(data.schema.get_field_index(key), key, plain)
    return data


def _group_starts(data: pa.Table, keys: Sequence[str]) -> list[int]:
    """The first row of each run of equal keys in the sorted table (NULL equals NULL, and
    NaN equals NaN: DuckDB's GROUP BY makes one group of each)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(data)
    if n == 0:
        return []
    changed = None
    for key in keys:
        column = data.column(key).combine_chunks()
        if pa.types.is_null(column.type):
            continue  # all NULL (`NULL AS tenant`): one group, and Arrow cannot compare it
        a, b = column.slice(1), column.slice(0, n - 1)
        differs = pc.if_else(pc.and_(a.is_valid(), b.is_valid()),
                             pc.not_equal(a, b), pc.not_equal(a.is_valid(), b.is_valid()))
        if pa.types.is_floating(column.type):
            both_nan = pc.fill_null(pc.and_(pc.is_nan(a), pc.is_nan(b)), False)
            differs = pc.and_(differs, pc.invert(both_nan))
        changed = differs if changed is None else pc.or_(changed, differs)
    if changed is None:
        return [0]
    return [0] + [i + 1 for i in pc.indices_nonzero(changed).to_pylist()]


def _candidate_column(data: pa.Table, name: str, keys: Sequence[str]) -> pa.Array:
    """The column as the candidate reads it: nanosecond times (pandas) become microseconds,
    the precision of the SQL path, and refuse to lose digits."""
    import pyarrow as pa

    column = data.column(name).combine_chunks()
    kind = column.type
    if pa.types.is_timestamp(kind) and kind.unit == "ns":
        try:
            column = column.cast(pa.timestamp("us", kind.tz))
        except pa.ArrowInvalid:
            raise CandidateError(
                f"column {name!r} holds times with nanoseconds, such as "
                f"{_finer_than_microseconds(data, name, keys)}; candidates keep microseconds "
                f"(as TIMESTAMPTZ does): round it, e.g. df[{name!r}].dt.floor('us')") from None
    return column


def _finer_than_microseconds(data: pa.Table, name: str, keys: Sequence[str]) -> str:
    """The first time of the column with nanoseconds, its candidate's id and group, as
    '2024-05-01 10:00:00.000000001+00:00 (candidate id 'a' in the group q=1)'."""
    import pyarrow as pa
    import pyarrow.compute as pc

    column = data.column(name).combine_chunks()
    rounded = column.cast(pa.timestamp("us", column.type.tz), safe=False).cast(column.type)
    row = pc.index(pc.not_equal(column, rounded), True).as_py()
    ids = [c for c in data.column_names if candidate_field(c, exact=c in keys) == "id"]
    who = f"candidate id {data.column(ids[0])[row].as_py()!r}" if ids else f"row {row}"
    group = ", ".join(f"{k}={data.column(k)[row].as_py()!r}" for k in keys)
    return f"{column[row]} ({who} in the group {group})"


def _line_costs(source: LineCostSource, config: PackingConfig) -> LineCosts | None:
    check_line_cost_source(source)
    if isinstance(source, (str, os.PathLike)):
        return LineCosts.read(source, encoding=config.encoding)
    return source


def check_line_cost_source(source: object) -> None:
    """Raise ConfigError unless `source` is None, a LineCosts or a path."""
    if not (source is None or isinstance(source, (LineCosts, str, os.PathLike))):
        raise ConfigError(f"line_costs must be a LineCosts or the path of a file written by "
                          f"rms_duck.export_line_costs(), got {type(source).__name__}")

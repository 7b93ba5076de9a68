"""Exact line costs persisted in DuckDB (rms_line_costs), so a new process need not re-cost.

A row is (encoding key, sha256 of the line's UTF-8 bytes, exact tokens of line + "\\n").
The key cannot go stale: the encoding key names the encoding and digests its verified BPE
ranks and pre-tokenizer pattern, and the line digest covers every byte of the line. The
in-process cache (tokens.LineCounter) holds the same costs keyed by the line text itself.

The rows are a cache anyone with write access can edit, so they are never evidence: a cost
outside its cheap bounds is refused when loaded, and after a pack every loaded cost it used
that the final whole-output count did not confirm is recounted. A wrong one makes the pack
run again from the tokenizer alone, is repaired when the pack is stored, and is reported
with an RmsWarning; the result never depends on it (pack_checked).

This module runs SQL through the connection it is given; it does not import duckdb.
"""

from __future__ import annotations

import os
import re
import warnings
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from ..bundle import MemoryBundle
from ..candidates import to_candidates
from ..config import PackingConfig
from ..errors import ConfigError, RmsWarning
from ..packing.forecast import frame_lines, likely_lines, standalone_lines
from ..packing.pipeline import pack_candidates
from ..records import Candidate
from ..tokens.bulk import check_count, warm_counter
from ..tokens.costfile import encoding_key, line_sha256
from ..tokens.counter import LineCounter
from ..tokens.encodings import DEFAULT_ENCODING, encoding_source, get_encoding
from .cursors import check_connection, explains_setup

_NODE_BATCH = 50_000
_HEX = re.compile("[0-9a-f]{64}")
# Digests per lookup: few enough that DuckDB probes the line_sha256 index instead of
# scanning the table, so a pack's lookups cost the same however many rows are stored.
_LOOKUP_BATCH = 500
# The node columns a rendered line can show (score does not appear in any line).
_NODE_QUERY = (
    "SELECT id::VARCHAR AS id, 0.0 AS score, content, type, namespace_id, "
    "structured_value::VARCHAR AS structured_value, prose, epistemic_type, source_type, "
    "lifecycle_state, confidence, event_time, valid_from, valid_to, "
    "superseded_by::VARCHAR AS superseded_by, speaker, condition_state FROM rms_nodes"
)


@dataclass(frozen=True, slots=True)
class RefreshResult:
    """What refresh_line_costs() did: distinct lines seen, found stored, tokenized, stored."""

    lines: int
    loaded: int
    computed: int
    stored: int


def load_line_costs(con, lines: Iterable[str], *,
                    encoding: str = DEFAULT_ENCODING) -> dict[str, int]:
    """Persisted costs of those of `lines` that have one, keyed by line text."""
    by_digest = {line_sha256(line): line for line in dict.fromkeys(lines)}
    found = _stored_costs(con, list(by_digest), encoding_key(encoding))
    return {by_digest[digest]: n for digest, n in found.items()}


def _stored_costs(con, digests: list[str], key: str) -> dict[str, int]:
    """line_sha256 -> n_tokens for the digests stored under encoding key `key`."""
    out: dict[str, int] = {}
    if not digests:
        return out
    cur = con.cursor()
    try:
        for start in range(0, len(digests), _LOOKUP_BATCH):
            sql = lookup_sql(digests[start:start + _LOOKUP_BATCH])
            if sql:
                rows = cur.execute(sql).fetchall()
                out.update((digest, n) for digest, encoding, n in rows if encoding == key)
    finally:
        cur.close()
    return out


def lookup_sql(digests: Sequence[str]) -> str | None:
    """The SELECT that finds stored costs for these line digests (any encoding), or None.

    Literal hex digests (made here, never caller text) and no other predicate: DuckDB then
    probes the line_sha256 index; with `AND encoding = ?` it scans the whole table, so a
    pack's lookups would cost more with every line ever stored. Callers compare encodings.
    """
    listed = ", ".join(f"'{digest}'" for digest in digests if _HEX.fullmatch(digest))
    if not listed:
        return None
    return ("SELECT line_sha256, encoding, n_tokens FROM rms_line_costs "
            f"WHERE line_sha256 IN ({listed})")


def store_line_costs(con, costs: Mapping[str, int], *, encoding: str = DEFAULT_ENCODING) -> int:
    """Persist exact line costs; rows already stored are kept. Returns rows added."""
    if not costs:
        return 0
    key = encoding_key(encoding)
    digests = {line_sha256(line): cost for line, cost in costs.items()}
    # A plain INSERT of the new rows: ON CONFLICT costs grow with the table.
    for digest in _stored_costs(con, list(digests), key):
        digests.pop(digest)
    if not digests:
        return 0
    table = pa.table({
        "encoding": pa.array([key] * len(digests), pa.string()),
        "line_sha256": pa.array(list(digests), pa.string()),
        "n_tokens": pa.array(list(digests.values()), pa.int32()),
    })
    cur = con.cursor()
    try:
        cur.register("rms_new_line_costs", table)
        return int(cur.execute(
            "INSERT INTO rms_line_costs SELECT * FROM rms_new_line_costs").fetchall()[0][0])
    finally:
        cur.close()


def repair_line_costs(con, costs: Mapping[str, int], *, encoding: str = "cl100k_base") -> int:
    """Overwrite stored costs with exact ones (line -> exact cost). Returns rows changed."""
    key = encoding_key(encoding)
    cur = con.cursor()
    try:
        cur.executemany(
            "UPDATE rms_line_costs SET n_tokens = ? WHERE encoding = ? AND line_sha256 = ?",
            [[cost, key, line_sha256(line)] for line, cost in costs.items()])
    finally:
        cur.close()
    return len(costs)


def wrong_loaded_costs(counter: LineCounter, context: str) -> dict[str, tuple[int, int]]:
    """line -> (stored cost, exact cost) for every wrong loaded cost this counter met.

    A loaded cost of a line in the final context is confirmed by the output's own tokens
    (_confirmed_by_output); every other loaded cost the pack used, and all of them when the
    whole-output count disagreed with the sum of the line costs, is recounted here. Costs
    refused at load time for being out of bounds are wrong by construction.
    """
    used = counter.consulted
    if not counter.mismatches:
        used = used - _confirmed_by_output(counter, context)
    wrong = {}
    for line in used:
        stored, exact = counter.loaded_cost(line), counter.exact(line)
        if stored is not None and stored != exact:
            wrong[line] = (stored, exact)
    for line, stored in counter.rejected.items():
        wrong[line] = (stored, counter.exact(line))
    return wrong


def _confirmed_by_output(counter: LineCounter, context: str) -> set[str]:
    """The context lines whose loaded cost equals the tokens of the whole output that fall on
    that line, where every line starts on a token boundary.

    A matching sum alone confirms nothing per line: a cost one too high on one line and one
    too low on another add up right, yet choose different records. Tokenizers without
    offsets confirm nothing here, so each of their loaded costs is recounted.
    """
    encoding = get_encoding(counter.encoding)
    decode = getattr(encoding, "decode_with_offsets", None)
    consulted = counter.consulted
    if decode is None or not consulted:
        return set()
    _, offsets = decode(encoding.encode_ordinary(context))
    starts = set(offsets)
    confirmed: set[str] = set()
    failed: set[str] = set()  # a line shown twice must be confirmed at each place
    position = 0
    lines = context.split("\n")
    for i, line in enumerate(lines):
        end = position + len(line) + (1 if i < len(lines) - 1 else 0)
        if line in consulted:
            tokens = bisect_left(offsets, end) - bisect_left(offsets, position)
            aligned = position in starts and (end in starts or end == len(context))
            (confirmed if aligned and tokens == counter.loaded_cost(line) else failed).add(line)
        position = end
    return confirmed - failed


def pack_checked(con, candidates: Sequence[Candidate], *, budget: int, config: PackingConfig,
                 store: bool) -> tuple[MemoryBundle, LineCounter | None, dict[str, int]]:
    """pack_candidates() with the persisted line costs, none of which can change the result.

    A wrong stored cost that the pack used makes it run again from the tokenizer alone; any
    wrong cost found is reported with an RmsWarning. Returns the bundle, the counter whose
    fresh costs may be persisted, and the exact costs of the wrong rows (line -> cost), which
    the caller writes back after storing (repair_line_costs).
    """
    counter = primed_counter(con, candidates, config, budget)
    bundle = pack_candidates(candidates, budget=budget, config=config, counter=counter)
    if counter is None:
        return bundle, None, {}
    wrong = wrong_loaded_costs(counter, bundle.context)
    if not wrong:
        return bundle, counter, {}
    if any(line in counter.consulted for line in wrong):
        counter = LineCounter(config.encoding, record=True)
        bundle = pack_candidates(candidates, budget=budget, config=config, counter=counter)
    sample = ", ".join(f"{stored} instead of {exact}" for stored, exact in
                       list(wrong.values())[:3])
    warnings.warn(RmsWarning(
        f"rms_line_costs held {len(wrong)} wrong cost(s) for this pack's lines ({sample}); "
        "the pack was counted with the tokenizer instead"
        + (" and the rows are corrected as it is stored" if store else "")
        + ": someone edited the cache; run `rms-duck audit --db PATH --line-costs` to find "
        "the others, or DELETE FROM rms_line_costs (it is only a cache)"), stacklevel=3)
    return bundle, counter, {line: exact for line, (_, exact) in wrong.items()}


def prime_counter(con, counter: LineCounter, lines: Iterable[str]) -> int:
    """Load the persisted costs of the lines `counter` has not cached. Returns how many."""
    found = load_line_costs(con, counter.unseen(lines), encoding=counter.encoding)
    counter.prime(found.items())
    return len(found)


def prime_for_pack(con, counter: LineCounter, candidates: Sequence[Candidate],
                   config: PackingConfig, budget: int) -> int:
    """Before a pack: load the persisted costs of the lines it will likely need."""
    lines = frame_lines(candidates, config, budget) + likely_lines(candidates, config, budget)
    return prime_counter(con, counter, lines)


def persist_counter(con, counter: LineCounter) -> int:
    """After a pack: store the lines this counter tokenized (LineCounter(record=True))."""
    fresh = counter.take_fresh()
    return store_line_costs(con, fresh, encoding=counter.encoding) if fresh else 0


@explains_setup("rms_duck.refresh_line_costs")
def refresh_line_costs(con, *, encoding: str = DEFAULT_ENCODING,
                       formats: Sequence[str] = ("reader",),
                       processes: int | None = None,
                       threshold_chars: int | None = None) -> RefreshResult:
    """The ingest/refresh pass: cost every node's standalone lines that are not stored yet.

    Renders each rms_nodes row in each format (every level the format shows, no citation
    reference, no conflict marks), loads the costs already stored, tokenizes the rest
    together (across processes when the batch is large), stores them, and leaves all of
    them in this process's cache, so packs of these nodes tokenize only their output check.
    Compact lines carry a per-pack reference, so the compact format gains nothing here.

    Raises:
        ConfigError: an unknown format. EncodingUnavailableError: an unknown encoding.
    """
    check_connection(con, "rms_duck.refresh_line_costs")
    check_count("processes", processes, "pass None for every core, or 1 to stay in this "
                "process")
    check_count("threshold_chars", threshold_chars, "pass None for the default, or the "
                "characters from which a batch is shared with worker processes")
    formats = (formats,) if isinstance(formats, str) else tuple(formats)  # "reader" is one
    counter = LineCounter(encoding)
    encoding_source(encoding)
    seen = loaded = computed = stored = 0
    for nodes in _node_batches(con):
        lines = list(dict.fromkeys(
            line for c in nodes for fmt in formats for line in standalone_lines(c, fmt)))
        seen += len(lines)
        found = load_line_costs(con, lines, encoding=encoding)
        counter.prime(found.items())
        loaded += len(found)
        missing = [line for line in lines if line not in found]
        computed += warm_counter(counter, missing, processes=processes,
                                 threshold_chars=threshold_chars)
        costs = {line: counter.cached_cost(line) for line in missing}
        stored += store_line_costs(con, {k: v for k, v in costs.items() if v is not None},
                                   encoding=encoding)
    return RefreshResult(lines=seen, loaded=loaded, computed=computed, stored=stored)


def _node_batches(con) -> Iterable[list[Candidate]]:
    cur = con.cursor()
    try:
        reader = cur.sql(_NODE_QUERY).to_arrow_reader(_NODE_BATCH)
        for batch in reader:
            yield to_candidates(batch.to_pylist())
    finally:
        cur.close()


def primed_counter(con, candidates: Sequence[Candidate], config: PackingConfig,
                   budget: object) -> LineCounter | None:
    """A recording LineCounter that loads the persisted costs this pack will likely need at
    its first line no cache holds: a pack whose every line this process has costed before
    neither forecasts its lines nor queries rms_line_costs.

    None when the budget is not a positive whole number: pack_candidates() then reports it.
    """
    if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
        return None
    counter = LineCounter(config.encoding, record=True)
    counter.load_on_first_miss(
        lambda counter: prime_for_pack(con, counter, candidates, config, budget))
    return counter


@explains_setup("rms_duck.export_line_costs")
def export_line_costs(con, path: str, *, encoding: str | None = None) -> int:
    """Write the store's persisted line costs to a Parquet file that cluster workers read
    (rms_duck.pack_batches(line_costs=path)), so they never re-tokenize what is stored.

    Args:
        con: a connection to the store.
        path: the Parquet file to write (replaced if it exists).
        encoding: only this encoding's costs (default: every encoding stored).

    Returns:
        The number of line costs written.

    Raises:
        ConfigError: `path` is a folder, or cannot be written; no file is left behind.
    """
    check_connection(con, "rms_duck.export_line_costs")
    import pyarrow.parquet as pq

    sql = "SELECT encoding, line_sha256, n_tokens FROM rms_line_costs"
    params: list[str] = []
    if encoding is not None:
        sql += " WHERE encoding = ?"
        params.append(encoding_key(encoding))
    target = os.fspath(path)
    if os.path.isdir(target):
        raise ConfigError(f"path {target!r} is a folder; pass the Parquet file to write, for "
                          f"example {os.path.join(target, 'line_costs.parquet')!r}")
    # Written beside the target and moved into place: a failure leaves no half-written file.
    partial = f"{target}.{os.getpid()}.partial"
    cur = con.cursor()
    written = 0
    try:
        reader = cur.sql(sql + " ORDER BY encoding, line_sha256",
                         params=params).to_arrow_reader(_NODE_BATCH)
        try:
            with pq.ParquetWriter(partial, reader.schema) as writer:
                for batch in reader:
                    writer.write_batch(batch)
                    written += batch.num_rows
            os.replace(partial, target)
        except OSError as exc:
            raise ConfigError(f"cannot write line costs to {target!r} ({exc}); pass a path "
                              "in a folder that exists and that you may write to") from exc
        finally:
            if os.path.exists(partial):
                os.remove(partial)
    finally:
        cur.close()
    return written

"""Exact line costs persisted in DuckDB (rms_line_costs), so a new process need not re-cost.

A row is (encoding key, sha256 of the line's UTF-8 bytes, exact tokens of line + "\\n").
The key cannot go stale: the encoding key names the encoding and digests its verified BPE
ranks and pre-tokenizer pattern, and the line digest covers every byte of the line. The
in-process cache (tokens.LineCounter) holds the same costs keyed by the line text itself.

This module runs SQL through the connection it is given; it does not import duckdb.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import pyarrow as pa

from ..candidates import to_candidates
from ..config import PackingConfig
from ..packing.forecast import frame_lines, likely_lines, standalone_lines
from ..records import Candidate
from ..tokens.bulk import warm_counter
from ..tokens.costfile import encoding_key, line_sha256
from ..tokens.counter import LineCounter
from ..tokens.encodings import DEFAULT_ENCODING, encoding_source

_NODE_BATCH = 50_000
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
    if not by_digest:
        return {}
    wanted = pa.table({"line_sha256": pa.array(list(by_digest), pa.string())})
    cur = con.cursor()
    try:
        cur.register("rms_wanted_line_costs", wanted)
        rows = cur.execute(
            "SELECT c.line_sha256, c.n_tokens FROM rms_line_costs c SEMI JOIN "
            "rms_wanted_line_costs w USING (line_sha256) WHERE c.encoding = ?",
            [encoding_key(encoding)]).fetchall()
    finally:
        cur.close()
    return {by_digest[digest]: n for digest, n in rows}


def store_line_costs(con, costs: Mapping[str, int], *, encoding: str = DEFAULT_ENCODING) -> int:
    """Persist exact line costs; rows already stored are kept. Returns rows added."""
    if not costs:
        return 0
    key = encoding_key(encoding)
    table = pa.table({
        "encoding": pa.array([key] * len(costs), pa.string()),
        "line_sha256": pa.array([line_sha256(line) for line in costs], pa.string()),
        "n_tokens": pa.array(list(costs.values()), pa.int32()),
    })
    cur = con.cursor()
    try:
        cur.register("rms_new_line_costs", table)
        return int(cur.execute(
            "INSERT INTO rms_line_costs SELECT DISTINCT * FROM rms_new_line_costs "
            "ON CONFLICT DO NOTHING").fetchall()[0][0])
    finally:
        cur.close()


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
    """A recording LineCounter holding the persisted costs this pack will likely need.

    None when the budget is not a positive whole number: pack_candidates() then reports it.
    """
    if not isinstance(budget, int) or isinstance(budget, bool) or budget <= 0:
        return None
    counter = LineCounter(config.encoding, record=True)
    prime_for_pack(con, counter, candidates, config, budget)
    return counter


def export_line_costs(con, path: str, *, encoding: str | None = None) -> int:
    """Write the store's persisted line costs to a Parquet file that cluster workers read
    (rms_duck.pack_batches(line_costs=path)), so they never re-tokenize what is stored.

    Args:
        con: a connection to the store.
        path: the Parquet file to write (replaced if it exists).
        encoding: only this encoding's costs (default: every encoding stored).

    Returns:
        The number of line costs written.
    """
    import pyarrow.parquet as pq

    sql = "SELECT encoding, line_sha256, n_tokens FROM rms_line_costs"
    params: list[str] = []
    if encoding is not None:
        sql += " WHERE encoding = ?"
        params.append(encoding_key(encoding))
    cur = con.cursor()
    written = 0
    try:
        reader = cur.sql(sql + " ORDER BY encoding, line_sha256",
                         params=params).to_arrow_reader(_NODE_BATCH)
        with pq.ParquetWriter(path, reader.schema) as writer:
            for batch in reader:
                writer.write_batch(batch)
                written += batch.num_rows
    finally:
        cur.close()
    return written

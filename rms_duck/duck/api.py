"""The Python API over a DuckDB connection: rank with a query (or pass Arrow), pack, store."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import duckdb
import pyarrow as pa

from ..bundle import MemoryBundle
from ..candidates import to_candidates
from ..columnar import intake
from ..config import PackingConfig, parse_config
from ..errors import CandidateError
from ..packing.pipeline import pack_candidates
from .cursors import cursor
from .linecosts import persist_counter, primed_counter
from .query import check_query
from .storage import store_bundle


def pack(con: duckdb.DuckDBPyConnection, candidates: str | pa.Table | pa.RecordBatch, *,
         budget: int, config: PackingConfig | Mapping[str, Any] | str | None = None,
         store: bool = True, dialect: str = "duckdb", params: Sequence[Any] | None = None,
         namespace: str | None = None, session_id: str | None = None) -> MemoryBundle:
    """Rank (or take) candidates, pack them into `budget` tokens, and store the result.

    Args:
        con: a connection prepared by rms_duck.connect() or rms_duck.register().
        candidates: a read-only SELECT in `dialect` returning candidate rows, or an Arrow table.
        budget: the context budget in tokens, overhead included.
        config: PackingConfig fields (object, dict or JSON text).
        store: write the bundle and its receipt in one transaction (False skips storing).
        params: values for the query's ? placeholders.
        namespace: the receipt chain to extend (default: the candidates' shared namespace).

    Returns:
        The MemoryBundle; when stored, its receipt_id is set.

    Raises:
        QueryRejectedError, CandidateError, ConfigError: nothing is stored.
    """
    config = parse_config(config)
    query = None
    if isinstance(candidates, str):
        checked = check_query(candidates, dialect, tables=known_tables(con))
        rows: Sequence[Any] = _run_read_only(con, checked.sql, params)
        query = checked.to_dict()
    elif isinstance(candidates, (pa.Table, pa.RecordBatch)):
        rows = intake(candidates)  # checked a column at a time; to_candidates finishes
    else:
        raise CandidateError(
            f"candidates must be a ranking query string or a pyarrow Table, got "
            f"{type(candidates).__name__}; use pa.Table.from_pylist(rows) for Python rows")
    validated = to_candidates(rows)
    # Persisted line costs (rms_line_costs) spare a new process from re-tokenizing.
    counter = primed_counter(con, validated, config, budget)
    bundle = pack_candidates(validated, budget=budget, config=config, counter=counter)
    if not store:
        return bundle
    stored = store_bundle(con, bundle, validated, namespace=namespace, session_id=session_id,
                          query=query)
    if counter is not None:
        _persist_costs(con, counter)
    return replace(bundle, receipt_id=stored.receipt_id)


def _persist_costs(con: duckdb.DuckDBPyConnection, counter: Any) -> None:
    """Save the line costs this pack counted. The bundle and receipt are committed already
    and rms_line_costs is only a cache, so losing a race for the same line to a concurrent
    writer (a duplicate-key or write-write conflict) must not fail the pack."""
    try:
        persist_counter(con, counter)
    except (duckdb.TransactionException, duckdb.ConstraintException):
        pass


def known_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Every table and view name a query may read: bare, schema- and catalog-qualified."""
    rows = con.execute(
        "SELECT database_name, schema_name, table_name FROM duckdb_tables() UNION ALL "
        "SELECT database_name, schema_name, view_name FROM duckdb_views()").fetchall()
    names: set[str] = set()
    for database, schema, name in rows:
        database, schema, name = database.lower(), schema.lower(), name.lower()
        names.update((name, f"{schema}.{name}", f"{database}.{schema}.{name}"))
    return names


_RMS_CALL = re.compile(r"\brms_\w+\s*\(", re.IGNORECASE)


def _run_read_only(con: duckdb.DuckDBPyConnection, sql: str,
                   params: Sequence[Any] | None) -> list[dict[str, Any]]:
    """Run the guarded query inside a READ ONLY transaction: the engine's own second wall."""
    # A cursor does not see the connection's TEMP macros; create them when the query calls one.
    cur = cursor(con, macros=bool(_RMS_CALL.search(sql)))
    try:
        cur.execute("BEGIN TRANSACTION READ ONLY")
        try:
            return cur.sql(sql, params=list(params or [])).to_arrow_table().to_pylist()
        finally:
            cur.execute("ROLLBACK")
    finally:
        cur.close()

"""The Python API over a DuckDB connection: rank with a query (or pass Arrow), pack, store."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import duckdb

from ..bundle import MemoryBundle
from ..candidates import to_candidates
from ..columnar import intake
from ..config import PackingConfig, parse_config
from ..errors import QueryRejectedError, ReceiptError
from ..packing.pipeline import pack_candidates
from .arrowin import arrow_table
from .cursors import cursor
from .indexcheck import ensure_index, reads_lexical_index
from .linecosts import persist_counter, primed_counter
from .query import check_query
from .storage import store_bundle


def pack(con: duckdb.DuckDBPyConnection, candidates: str | Any, *,
         budget: int, config: PackingConfig | Mapping[str, Any] | str | None = None,
         store: bool = True, dialect: str = "duckdb", params: Sequence[Any] | None = None,
         namespace: str | None = None, session_id: str | None = None) -> MemoryBundle:
    """Rank (or take) candidates, pack them into `budget` tokens, and store the result.

    Args:
        con: a connection prepared by rms_duck.connect() or rms_duck.register().
        candidates: a read-only SELECT in `dialect` returning candidate rows (it may read
            the connection's TEMP tables, views and registered DataFrames), or any
            Arrow-capable table: pyarrow, pandas, polars, a DuckDB relation, or anything
            with __arrow_c_stream__.
        budget: the context budget in tokens, overhead included.
        config: PackingConfig fields (object, dict or JSON text).
        store: write the bundle and its receipt in one transaction (False skips storing).
        params: values for the query's ? placeholders.
        namespace: the receipt chain to extend (default: the candidates' shared namespace).

    Returns:
        The MemoryBundle; when stored, its receipt_id is set.

    Raises:
        QueryRejectedError, CandidateError, ConfigError: nothing is stored.
        ReceiptError: store=True on a read-only database (pass store=False).
    """
    config = parse_config(config)
    query = None
    if isinstance(candidates, str):
        local = connection_local_tables(con)
        checked = check_query(candidates, dialect, tables=known_tables(con))
        if reads_lexical_index(checked.sql):
            ensure_index(con)
        reads_local = bool(local & set(checked.tables))
        rows: Sequence[Any] = _run_read_only(con, checked.sql, params, on_connection=reads_local)
        query = checked.to_dict()
    else:
        # Any Arrow-capable table, checked a column at a time; to_candidates finishes.
        rows = intake(arrow_table(candidates))
    return pack_rows(con, rows, budget=budget, config=config, store=store, query=query,
                     namespace=namespace, session_id=session_id)


def pack_rows(con: duckdb.DuckDBPyConnection, rows: Sequence[Any], *,
              budget: int, config: PackingConfig | Mapping[str, Any] | str | None = None,
              store: bool = True, query: dict[str, Any] | None = None,
              namespace: str | None = None, session_id: str | None = None) -> MemoryBundle:
    """pack() for candidate rows already in Python (dicts): the CLI and MCP server use it."""
    config = parse_config(config)
    validated = to_candidates(rows)
    # Persisted line costs (rms_line_costs) spare a new process from re-tokenizing.
    counter = primed_counter(con, validated, config, budget)
    bundle = pack_candidates(validated, budget=budget, config=config, counter=counter)
    if not store:
        return bundle
    try:
        stored = store_bundle(con, bundle, validated, namespace=namespace,
                              session_id=session_id, query=query)
    except duckdb.InvalidInputException as exc:
        if "read-only" not in str(exc):
            raise
        raise ReceiptError(
            "cannot store the bundle: the database is open read-only; pass store=False to "
            "pack without storing, or open it with rms_duck.connect(path)") from None
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


def connection_local_tables(con: duckdb.DuckDBPyConnection) -> set[str]:
    """Names (bare and qualified) of TEMP tables and views, registered DataFrames included:
    objects only this connection sees, so a query reading one must run on it, not a cursor."""
    rows = con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE database_name = 'temp' "
        "UNION ALL SELECT schema_name, view_name FROM duckdb_views() "
        "WHERE database_name = 'temp' AND NOT internal").fetchall()
    names: set[str] = set()
    for schema, name in rows:
        names.update((name.lower(), f"{schema.lower()}.{name.lower()}",
                      f"temp.{schema.lower()}.{name.lower()}"))
    return names


def _run_read_only(con: duckdb.DuckDBPyConnection, sql: str, params: Sequence[Any] | None,
                   *, on_connection: bool = False) -> list[dict[str, Any]]:
    """Run the guarded query inside a READ ONLY transaction: the engine's own second wall.

    It runs on a cursor of its own (thread-safe, no clash with the caller's transaction)
    unless it reads the connection's TEMP objects, which a cursor cannot see.
    """
    # A cursor sees only the macros stored in the file; give it the shipped SQL as TEMP
    # copies when the query calls one (the stored bodies are not trusted).
    cur = con if on_connection else cursor(con, macros=bool(_RMS_CALL.search(sql)))
    try:
        try:
            cur.execute("BEGIN TRANSACTION READ ONLY")
        except duckdb.TransactionException:
            raise QueryRejectedError(
                "the ranking query reads this connection's TEMP tables or registered "
                "DataFrames, so it must run on the connection itself, which has a "
                "transaction open; COMMIT or ROLLBACK it before calling rms_duck.pack"
            ) from None
        try:
            return cur.sql(sql, params=list(params or [])).to_arrow_table().to_pylist()
        finally:
            cur.execute("ROLLBACK")
    finally:
        if not on_connection:
            cur.close()


_RMS_CALL = re.compile(r"\b(rms_\w+|pack_context)\s*\(", re.IGNORECASE)

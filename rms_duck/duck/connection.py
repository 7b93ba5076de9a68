"""Open or prepare DuckDB connections: UTC, schema, UDFs, macros. Idempotent."""

from __future__ import annotations

import duckdb

from ..sqlfiles import read_sql
from .udfs import UDFS


def connect(database: str = ":memory:", *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection in UTC with the rms schema, UDFs and macros ready."""
    con = duckdb.connect(database, read_only=read_only)
    register(con)
    return con


def register(con: duckdb.DuckDBPyConnection, *, replace: bool = False) -> duckdb.DuckDBPyConnection:
    """Install the schema (when writable), the UDFs and the macros on `con`.

    A second call skips what is already there; replace=True re-registers the UDFs.
    """
    utc(con)
    if not _read_only(con):
        con.execute(read_sql("schema.sql"))
    present = {row[0] for row in con.execute(
        "SELECT function_name FROM duckdb_functions() WHERE function_name LIKE 'rms_%'"
    ).fetchall()}
    for udf in UDFS:
        if udf.name in present:
            if not replace:
                continue
            con.remove_function(udf.name)
        con.create_function(udf.name, udf.function, list(udf.parameters), udf.return_type,
                            type="arrow", null_handling="special")
    install_macros(con)
    return con


def install_macros(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Create the TEMP macros (pack_context, ranking); TEMP objects are per connection/cursor."""
    con.execute(read_sql("macros.sql"))
    con.execute(read_sql("ranking.sql"))
    return con


def utc(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Run this connection (or cursor) in UTC: TIMESTAMPTZ casts depend on the session zone."""
    con.execute("SET TimeZone = 'UTC'")
    return con


def cursor(con: duckdb.DuckDBPyConnection, *, macros: bool = False) -> duckdb.DuckDBPyConnection:
    """A cursor for this thread, also in UTC; macros=True also creates the TEMP macros on it
    (a cursor does not see the connection's TEMP macros; this costs tens of milliseconds)."""
    cur = utc(con.cursor())
    return install_macros(cur) if macros else cur


def _read_only(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "SELECT readonly FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchall()
    return bool(rows and rows[0][0])

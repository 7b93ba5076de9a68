"""Open or prepare DuckDB connections: UTC, schema, UDFs, macros. Idempotent."""

from __future__ import annotations

import sys

import duckdb

from .cursors import cursor, install_macros, utc
from .macros import install_persistent_macros, persistent_current
from .sqlfiles import read_sql
from .sqlstore import STORE_PARAMETERS, store_udf
from .udfs import UDFS

__all__ = ["connect", "cursor", "register"]


def connect(database: str = ":memory:", *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection in UTC with the rms schema, UDFs and macros ready."""
    con = duckdb.connect(database, read_only=read_only)
    if not (sys.stdout and sys.stdout.isatty()):
        # DuckDB's own bar would land in logs and pipes; a terminal keeps it.
        con.execute("SET enable_progress_bar = false")
    register(con)
    return con


def register(con: duckdb.DuckDBPyConnection, *, replace: bool = False) -> duckdb.DuckDBPyConnection:
    """Install the schema and persistent SQL macros (when writable), the UDFs and the TEMP
    macros over them on `con`.

    A second call skips what is already there; replace=True re-registers the UDFs.
    """
    utc(con)
    if not _read_only(con):
        con.execute(read_sql("schema.sql"))
        if not persistent_current(con):
            install_persistent_macros(con)
    present = {row[0] for row in con.execute(
        "SELECT function_name FROM duckdb_functions() WHERE function_name LIKE 'rms_%'"
    ).fetchall()}
    for udf in UDFS:
        if udf.name in present:
            if not replace:
                continue
            con.remove_function(udf.name)
        # The stubs take only enums for type/null_handling and reject list[str]; both work.
        con.create_function(udf.name, udf.function,  # type: ignore[call-overload]
                            list(udf.parameters), udf.return_type,
                            type="arrow", null_handling="special")
    if "rms_store_udf" not in present or replace:
        if "rms_store_udf" in present:
            con.remove_function("rms_store_udf")
        # It writes (a bundle and a receipt per row), so DuckDB must never fold or skip it.
        con.create_function("rms_store_udf", store_udf(con),  # type: ignore[call-overload]
                            list(STORE_PARAMETERS), "VARCHAR", type="arrow",
                            null_handling="special", side_effects=True)
    install_macros(con)
    return con


def _read_only(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "SELECT readonly FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchall()
    return bool(rows and rows[0][0])

"""Open or prepare DuckDB connections: UTC, schema, UDFs, macros. Idempotent."""

from __future__ import annotations

import warnings

import duckdb

from ..errors import RmsWarning
from .cursors import cursor, install_macros, utc
from .shipped import SCHEMA_FILES, restore_objects
from .sqlfiles import read_sql
from .udfs import UDFS

__all__ = ["connect", "cursor", "register"]


def connect(database: str = ":memory:", *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection in UTC with the rms schema, UDFs and macros ready."""
    con = duckdb.connect(database, read_only=read_only)
    register(con)
    return con


def register(con: duckdb.DuckDBPyConnection, *, replace: bool = False) -> duckdb.DuckDBPyConnection:
    """Install the schema (when writable), the UDFs and the macros on `con`.

    A second call skips what is already there; replace=True re-registers the UDFs. Stored
    rms_* views and macros that differ from the shipped ones are restored, with an RmsWarning
    naming them (verification never reads them either way).
    """
    utc(con)
    if not _read_only(con):
        install_schema(con)
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
    install_macros(con)
    return con


def install_schema(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Create the stored schema and restore changed shipped views and macros (their names)."""
    for name in SCHEMA_FILES:
        con.execute(read_sql(name))
    restored = restore_objects(con)
    if restored:
        warnings.warn(RmsWarning(
            f"restored the shipped definitions of {', '.join(restored)}: the stored ones "
            "differed (an older rms_duck created them, or someone with write access replaced "
            "them); run rms_duck.verify_receipts(con) to see whether receipts were edited too"),
            stacklevel=3)
    return restored


def _read_only(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "SELECT readonly FROM duckdb_databases() WHERE database_name = current_database()"
    ).fetchall()
    return bool(rows and rows[0][0])

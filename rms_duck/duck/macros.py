"""The SQL macros: pure-SQL ones persist in the database, Python-backed ones are TEMP.

Pure-SQL macros (audit, explain, BM25 ranking: sql/macros.sql, sql/ranking.sql) are stored
in the database beside the schema, so a DuckDB client that never imported rms_duck can
verify receipts and rank. Their text is versioned with the schema: row MACROS_VERSION of
rms_schema_version records the sha256 of the SQL that created them, and register() re-creates
them when the package's SQL differs. The Python-backed macros (pack_context, rms_store, ...)
are persistent stubs that raise "call rms_duck.register(con)" (sql/python_stubs.sql), shadowed
on a registered connection by TEMP macros over the UDFs (sql/python_macros.sql).

The stored macros are a convenience for other clients: anyone who can write the file can
change them (and the digest row beside them). So every connection or cursor rms_duck prepares
gets TEMP copies of the shipped SQL, which shadow the stored ones: rms_duck itself never runs
a macro body read from the file.
"""

from __future__ import annotations

import hashlib
from functools import cache

import duckdb

from .sqlfiles import read_sql

MACROS_VERSION = 2
PERSISTENT_FILES = ("python_stubs.sql", "macros.sql", "ranking.sql")
_PURE_FILES = ("macros.sql", "ranking.sql")


@cache
def persistent_digest() -> str:
    """sha256 of the persistent macros' SQL, as recorded in rms_schema_version."""
    text = "\n".join(read_sql(name) for name in PERSISTENT_FILES)
    return hashlib.sha256(text.encode()).hexdigest()


def persistent_current(con: duckdb.DuckDBPyConnection) -> bool:
    """True when the database holds the persistent macros of this version of rms_duck."""
    try:
        rows = con.execute("SELECT sql_sha256 FROM rms_schema_version WHERE version = ?",
                           [MACROS_VERSION]).fetchall()
    except duckdb.Error:  # no schema, or a schema from before the macros persisted
        return False
    return bool(rows) and rows[0][0] == persistent_digest()


def install_persistent_macros(con: duckdb.DuckDBPyConnection) -> None:
    """Create (or replace) the persistent macros and record their digest; needs write access."""
    for name in PERSISTENT_FILES:
        con.execute(read_sql(name))
    con.execute("INSERT OR REPLACE INTO rms_schema_version (version, applied_at, sql_sha256) "
                "VALUES (?, current_timestamp, ?)", [MACROS_VERSION, persistent_digest()])


def install_temp_macros(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Create the TEMP macros on `con` (a connection or cursor): copies of the shipped
    pure-SQL macros, which shadow whatever the file stores, and the Python-backed ones."""
    from .sqlstore import STORE_CONNECTION, connection_number  # sqlstore imports cursors
    from .wholecast import WHOLES_AS_DOUBLE, wholes_as_double_type

    for name in _PURE_FILES:
        con.execute(temp_sql(name))
    # rms_store's UDF stores through the connection its macro was created on, named by a
    # number: the UDF is shared by every connection of the database (DuckDB keeps Python UDFs
    # in its system catalog), so it cannot hold one of them.
    sql = read_sql("python_macros.sql")
    for placeholder in (STORE_CONNECTION, WHOLES_AS_DOUBLE):
        if placeholder not in sql:
            raise RuntimeError(f"sql/python_macros.sql no longer holds {placeholder}")
    con.execute(sql.replace(STORE_CONNECTION, str(connection_number(con)))
                .replace(WHOLES_AS_DOUBLE, wholes_as_double_type()))
    return con


def temp_sql(name: str) -> str:
    """A persistent macro file rewritten to create TEMP macros instead."""
    return read_sql(name).replace("CREATE OR REPLACE MACRO", "CREATE OR REPLACE TEMP MACRO")

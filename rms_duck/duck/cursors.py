"""Cursors in UTC, with the TEMP macros on request: what storage and audits need, no UDFs."""

from __future__ import annotations

import duckdb

from .macros import install_temp_macros


def install_macros(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Create the TEMP macros on `con` (TEMP objects are per connection/cursor): the shipped
    SQL, shadowing the copies stored in the file, and the Python-backed ones."""
    return install_temp_macros(con)


def utc(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """Run this connection (or cursor) in UTC: TIMESTAMPTZ casts depend on the session zone."""
    con.execute("SET TimeZone = 'UTC'")
    return con


def cursor(con: duckdb.DuckDBPyConnection, *, macros: bool = False) -> duckdb.DuckDBPyConnection:
    """A cursor for this thread, in UTC and comparing text byte for byte (a caller's
    `SET GLOBAL default_collation = 'nocase'` would make a verify miss case-only edits and
    a chain lookup match the wrong namespace), in the database `con` reads (see _follow_use);
    macros=True also creates the TEMP macros on it (a cursor does not see the connection's
    TEMP macros; this costs tens of ms)."""
    cur = utc(con.cursor())
    cur.execute("SET SESSION default_collation = 'binary'")
    _follow_use(con, cur)
    return install_macros(cur) if macros else cur


def _follow_use(con: duckdb.DuckDBPyConnection, cur: duckdb.DuckDBPyConnection) -> None:
    """A cursor starts in the default database. After `ATTACH ...; USE` on `con`, packing,
    storing and every audit must use the database `con` uses, or a verify checks an empty
    database and passes. Only `con` knows which that is, and asking it ends any result the
    caller is still reading on it; so it is asked only when another database is attached,
    the one case where the answer can differ. A chosen database without rms_duck's tables
    (data attached to rank from) is not followed: the store stays where connect() made it.
    """
    (attached,), = cur.execute(
        "SELECT count(*) FROM duckdb_databases() WHERE NOT internal").fetchall()
    if attached <= 1:
        return
    where = con.execute("SELECT current_database(), current_schema()").fetchall()[0]
    if cur.execute("SELECT current_database(), current_schema()").fetchall()[0] == where:
        return
    (holds_store,), = cur.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE database_name = ? AND schema_name = ? "
        "AND lower(table_name) = 'rms_receipts'", list(where)).fetchall()
    if holds_store:
        cur.execute(f"USE {_quoted(where[0])}.{_quoted(where[1])}")


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


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


def cursor(con: duckdb.DuckDBPyConnection, *, macros: bool = False,
           follow_use: bool = False) -> duckdb.DuckDBPyConnection:
    """A cursor for this thread, in UTC and comparing text byte for byte (a caller's
    `SET GLOBAL default_collation = 'nocase'` would make a verify miss case-only edits and
    a chain lookup match the wrong namespace); macros=True also creates the TEMP macros on
    it (a cursor does not see the connection's TEMP macros; this costs tens of ms).

    follow_use=True (the audits) makes the cursor read the database `con` has chosen with
    USE (an ATTACHed file): a cursor starts in the default one, so a verify would check an
    empty database and pass. It asks `con` which one, so only callers that own `con` in
    this thread may pass it; packs from threads sharing `con` do not.
    """
    where = (con.execute("SELECT current_database(), current_schema()").fetchall()[0]
             if follow_use else None)
    cur = utc(con.cursor())
    cur.execute("SET SESSION default_collation = 'binary'")
    if where is not None and cur.execute(
            "SELECT current_database(), current_schema()").fetchall()[0] != where:
        cur.execute(f"USE {_quoted(where[0])}.{_quoted(where[1])}")
    return install_macros(cur) if macros else cur


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


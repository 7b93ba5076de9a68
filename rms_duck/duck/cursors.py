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
    a chain lookup match the wrong namespace); macros=True also creates the TEMP macros on
    it (a cursor does not see the connection's TEMP macros; this costs tens of ms)."""
    cur = utc(con.cursor())
    cur.execute("SET SESSION default_collation = 'binary'")
    return install_macros(cur) if macros else cur

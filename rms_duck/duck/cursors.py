"""Cursors in UTC, with the TEMP macros on request: what storage and audits need, no UDFs."""

from __future__ import annotations

import functools
import os
import threading
import weakref
from collections.abc import Callable
from typing import ParamSpec, TypeVar

import duckdb

from ..errors import ConfigError, ReceiptError
from ..escape import sql_identifier
from .macros import install_temp_macros


def check_connection(con: object, fn: str) -> None:
    """Refuse anything but a DuckDB connection (or cursor) as `con`, naming what to pass: a
    path or None failed deep inside with "cannot create weak reference
    to 'str' object" or "'str' object has no attribute 'cursor'"."""
    if isinstance(con, duckdb.DuckDBPyConnection):
        return
    if isinstance(con, (str, os.PathLike)):
        fix = (f"open the file first: con = rms_duck.connect({os.fspath(con)!r}), then "
               f"{fn}(con, ...)")
    else:
        fix = (f"open one first: con = rms_duck.connect('rms.duckdb') (or rms_duck.connect() "
               f"for an in-memory database), then {fn}(con, ...)")
    raise ConfigError(f"{fn}: con must be a DuckDB connection, got {type(con).__name__} "
                      f"{con!r}; {fix}")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def explains_setup(fn: str) -> Callable[[Callable[_P, _R]], Callable[_P, _R]]:
    """On a DuckDB catalog error, say when the cause is a connection rms_duck never set up.

    A plain duckdb.connect() failed with "Table with name rms_line_costs does not exist!"
    (or, on a file rms_duck wrote, "Scalar Function with name rms_pack_udf does not
    exist!"), which names no fix. Checked only after such an error, so it costs nothing."""
    def decorate(func: Callable[_P, _R]) -> Callable[_P, _R]:
        @functools.wraps(func)
        def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            try:
                return func(*args, **kwargs)
            except duckdb.CatalogException as exc:
                con = args[0] if args else kwargs.get("con")
                missing = _setup_missing(con)
                if missing is None:
                    raise
                raise ConfigError(
                    f"{fn}: this connection is not set up for rms_duck ({missing}); open the "
                    "database with con = rms_duck.connect(path), or call "
                    f"rms_duck.register(con) on it first (DuckDB said: "
                    f"{str(exc).splitlines()[0]})") from exc
        return wrapper
    return decorate


def _setup_missing(con: object) -> str | None:
    """What rms_duck.register() would add to `con`, in words, or None when it is set up (or
    cannot be asked)."""
    if not isinstance(con, duckdb.DuckDBPyConnection):
        return None
    try:
        cur = con.cursor()
        try:
            (tables, udfs), = cur.execute(
                "SELECT (SELECT count(*) FROM system.main.duckdb_tables() WHERE schema_name = "
                "'main' AND table_name = 'rms_schema_version'), (SELECT count(*) FROM "
                "system.main.duckdb_functions() WHERE function_name = 'rms_pack_udf')"
            ).fetchall()
        finally:
            cur.close()
    except duckdb.Error:
        return None
    if not tables:
        return "its database has no rms_* tables"
    if not udfs:
        return "rms_duck's functions are not registered on it"
    return None


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
    it (a cursor does not see the connection's TEMP macros; this costs tens of ms).

    A cursor reads the connection's default database, whatever `USE` chose on `con`:
    asking `con` would end a result its caller is still reading, fail inside a UDF running
    on it, and race threads sharing it. So packs store in, and audits read, the database
    connected to (audit_cursor refuses when that leaves an attached store unread)."""
    cur = utc(con.cursor())
    cur.execute("SET SESSION default_collation = 'binary'")
    return install_macros(cur) if macros else cur


def macro_cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """cursor(con, macros=True), made once per connection and thread and then kept.

    Creating the TEMP macros takes about 90 ms, as long as ranking a small store: made
    afresh for each guarded query, they were a third of an agent's rms_duck.pack call. The
    macros are the shipped SQL, the same for the life of the process, and each use runs in
    a transaction of its own, so a kept cursor answers as a new one would. It is kept per
    thread (a cursor serves one thread at a time) and holds `con` weakly, so it never
    keeps a connection alive; `con.close()` closes it too (releasing the file), and a
    closed one is made again."""
    ident = threading.get_ident()
    with _KEPT_GUARD:
        kept = _KEPT.get(con)
        if kept is None:
            kept = _KEPT[con] = {}
        cur = kept.get(ident)
    if cur is not None:
        try:
            cur.execute("SELECT 1").fetchall()  # closed with its connection, or broken?
            return cur
        except duckdb.Error:
            pass
    cur = cursor(con, macros=True)
    with _KEPT_GUARD:
        if len(kept) >= _KEPT_PER_CONNECTION:  # threads come and go: forget the oldest
            kept.pop(next(iter(kept)))  # not closed: its thread may still be using it
        kept[ident] = cur
    return cur


_KEPT: weakref.WeakKeyDictionary[duckdb.DuckDBPyConnection,
                                 dict[int, duckdb.DuckDBPyConnection]] = \
    weakref.WeakKeyDictionary()
_KEPT_GUARD = threading.Lock()
_KEPT_PER_CONNECTION = 16


def audit_cursor(con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyConnection:
    """cursor(con) for an audit, refusing to check an empty default database while an
    ATTACHed one holds receipts: after `ATTACH ... AS audited; USE audited` a verify would
    otherwise check the empty one and pass."""
    cur = cursor(con)
    try:
        _refuse_unread_store(cur)
    except BaseException:
        cur.close()
        raise
    return cur


def _refuse_unread_store(cur: duckdb.DuckDBPyConnection) -> None:
    (here,), = cur.execute("SELECT system.main.current_database()").fetchall()
    stores = _receipt_counts(cur)
    if stores.get(here):
        return
    elsewhere = {place: n for place, n in stores.items() if place != here and n}
    if elsewhere:
        listed = ", ".join(f"{place!r} ({n})" for place, n in sorted(elsewhere.items()))
        raise ReceiptError(
            f"rms_duck's audits read this connection's default database {here!r}, which holds "
            f"no receipts, while attached databases or other schemas hold some: {listed}; an "
            "audit reads the receipts in schema main of the database the connection was "
            "opened on, whatever ATTACH or USE did since. To audit an attached file, DETACH it "
            "and open it on a connection of its own, for example "
            "rms_duck.verify_receipts(duckdb.connect(path, read_only=True)); to audit the "
            "default database, DETACH the others (receipts kept in another schema are not "
            "rms_duck's store: copy them to main in a database of their own to audit them)")


def _receipt_counts(cur: duckdb.DuckDBPyConnection) -> dict[str, int]:
    """Receipts stored per place: 'db' for a database's schema main, 'db.schema' for any
    other schema (rms_duck stores only in main; a copy elsewhere is still a store the caller
    may think is audited)."""
    out: dict[str, int] = {}
    for db, schema in cur.execute(
            "SELECT database_name, schema_name FROM system.main.duckdb_tables() "
            "WHERE lower(table_name) = 'rms_receipts' ORDER BY ALL").fetchall():
        (count,), = cur.execute(
            f"SELECT count(*) FROM {sql_identifier(db)}.{sql_identifier(schema)}.rms_receipts"
        ).fetchall()
        place = db if schema == "main" else f"{db}.{schema}"
        out[place] = out.get(place, 0) + count
    return out

"""Open or prepare DuckDB connections: UTC, schema, UDFs, macros. Idempotent."""

from __future__ import annotations

import os
import re
import sys
import warnings

import duckdb

from ..config import check_flag
from ..errors import (
    DatabaseInUseError,
    DatabaseOpenError,
    RmsWarning,
    StoredObjectError,
    UdfOwnerError,
)
from ..escape import sql_identifier
from .cursors import check_connection, cursor, install_macros, utc
from .macros import install_persistent_macros, persistent_current
from .shipped import (
    drop_statement,
    fingerprints,
    object_problems,
    restore_objects,
    shadowing_objects,
    upgrade_views,
)
from .sqlfiles import read_sql
from .sqlstore import STORE_PARAMETERS, rms_store_udf
from .udfs import UDFS

__all__ = ["connect", "cursor", "register"]

IN_MEMORY_CHECKPOINT = "1TB"
# DuckDB installs a known extension from extensions.duckdb.org the first time a query names
# one of its functions or types (stem, INET, ...) or a path needs one (md:, s3://): a guarded
# ranking query could make the process download and load native code. rms_duck downloads
# nothing, so every connection it prepares has that switched off (a LOAD of an extension
# already installed still works, and so does an explicit INSTALL).
NO_AUTOINSTALL: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False}
_REMOTE = re.compile(r"^(?:md:|motherduck:|[A-Za-z][\w+.-]+://)", re.IGNORECASE)


def connect(database: str = ":memory:", *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection in UTC with the rms schema, UDFs and macros ready."""
    database = _database_path(database)
    if type(read_only) is not bool:  # DuckDB's own TypeError lists its whole signature
        raise DatabaseOpenError(
            f"read_only must be True or False, got {read_only!r}; pass read_only=True to "
            "open the file for reading only")
    try:
        if _REMOTE.match(database):
            # md:, s3://, https:// ...: DuckDB would download the extension that opens it
            # (over plain HTTP) before any SET could stop it. An installed one still loads.
            con = duckdb.connect(database, read_only=read_only, config=dict(NO_AUTOINSTALL))
        else:
            con = duckdb.connect(database, read_only=read_only)
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0]
        if isinstance(exc, duckdb.IOException) and "lock" in str(exc).lower():
            # DuckDB's message names the holder's process; one writer per file is its rule.
            raise DatabaseInUseError(
                f"cannot open database {database!r}: {first}; close that process's "
                "connection first, or open a copy of the file") from None
        if "different configuration" in str(exc):
            # The file exists and this process has it open already, the other way (read-only
            # or writable): DuckDB opens a file one way per process, whatever the path says.
            raise DatabaseOpenError(
                f"cannot open database {database!r}: {first}; this process already has the "
                f"file open {'writable' if read_only else 'read-only'}, and DuckDB opens a "
                "file one way per process: use that connection (or its con.cursor()), or "
                "close every connection to the file first (con.close()) and connect again"
            ) from None
        # Read-only cannot create a file: "or of a new file" sent the reader to make one.
        fix = ("pass the path of an existing DuckDB file (read-only opens no new one: create "
               "it first with rms_duck.connect(path))" if read_only else
               "pass the path of a DuckDB file, or of a new file in a folder that exists and "
               "that you may write to")
        raise DatabaseOpenError(f"cannot open database {database!r}: {first}; {fix}") from None
    if read_only and not _has_schema(con):
        con.close()
        raise DatabaseOpenError(
            f"database {database!r} has no rms_duck schema and is opened read-only, so it "
            "cannot be set up; open it writable once with rms_duck.connect(path) (or rms-duck "
            "pack --db PATH), or pass the file rms_duck wrote")
    if str(database) == "" or str(database).startswith(":memory:"):
        # In memory, DuckDB checkpoints again and again once 16 MiB of commits accumulate,
        # rewriting the changed tables each time, so each stored receipt would cost more
        # than the last. There a checkpoint only reclaims deleted rows: run CHECKPOINT.
        con.execute(f"SET checkpoint_threshold = '{IN_MEMORY_CHECKPOINT}'")
    if not (sys.stdout and sys.stdout.isatty()):
        # DuckDB's own bar would land in logs and pipes; a terminal keeps it.
        con.execute("SET enable_progress_bar = false")
    # A private in-memory database is new: no stored macro can shadow a UDF in it, and no
    # other connection has registered UDFs in its catalog (":memory:name" ones are shared).
    _register(con, replace=False, new_database=str(database) in ("", ":memory:"))
    return con


def _database_path(database: object) -> str:
    """The database argument as DuckDB's path text, or an error that says what to pass."""
    if isinstance(database, os.PathLike):
        database = os.fspath(database)
    if not isinstance(database, str):
        raise DatabaseOpenError(
            f"database must be the path of a DuckDB file (str or pathlib.Path) or ':memory:', "
            f"got {database!r}; pass for example rms_duck.connect('rms.duckdb'), or no "
            "argument for an in-memory database")
    return database


def _has_schema(con: duckdb.DuckDBPyConnection) -> bool:
    return bool(con.execute("SELECT 1 FROM system.main.duckdb_tables() WHERE table_name = "
                            "'rms_schema_version' AND schema_name = 'main'").fetchall())


def register(con: duckdb.DuckDBPyConnection, *, replace: bool = False) -> duckdb.DuckDBPyConnection:
    """Install the schema and persistent SQL macros (when writable), the UDFs and the TEMP
    macros over them on `con`.

    A second call skips what is already there; replace=True re-registers the UDFs. Stored
    rms_* views and macros that differ from the shipped ones are restored, with an RmsWarning
    naming them (verification never reads them either way).
    """
    check_connection(con, "rms_duck.register")
    check_flag("replace", replace, "pass replace=True to register the UDFs again")
    return _register(con, replace=replace, new_database=False)


def _register(con: duckdb.DuckDBPyConnection, *, replace: bool,
              new_database: bool) -> duckdb.DuckDBPyConnection:
    utc(con)
    con.execute("SET autoinstall_known_extensions = false")  # global: see NO_AUTOINSTALL
    _refuse_a_used_database(con)
    read_only = _read_only(con)
    if not read_only:
        install_schema(con)
    elif not _has_schema(con):
        # As connect(path, read_only=True) says: register() failed further on with "Catalog
        # Error: Type with name rms_candidate does not exist!".
        raise DatabaseOpenError(
            "this connection's database has no rms_duck schema and is open read-only, so it "
            "cannot be set up; open it writable once with rms_duck.connect(path) (or rms-duck "
            "pack --db PATH), or register a connection to the file rms_duck wrote")
    else:
        _warn_changed(con)
    # Listing DuckDB's functions costs about a sixth of connect(): a new database needs neither.
    present: set[str] = set()
    if not new_database:
        _clear_udf_names(con, read_only)
        # Only Python UDFs count (they live in the system catalog): a macro stored in the
        # file under a UDF's name must not stop the real UDF from being registered.
        present = {row[0] for row in con.execute(
            "SELECT function_name FROM system.main.duckdb_functions() "
            "WHERE function_name LIKE 'rms_%' AND database_name = 'system' "
            "AND function_type = 'scalar'").fetchall()}
    names = [udf.name for udf in UDFS] + ["rms_store_udf"]
    if replace:
        _remove_udfs(con, [name for name in names if name in present])
        present = set()
    _create_udfs(con, [name for name in names if name not in present])
    install_macros(con)
    return con


def _remove_udfs(con: duckdb.DuckDBPyConnection, names: list[str]) -> None:
    """Remove UDFs for re-registering them. DuckDB removes a UDF only through the Python
    connection that registered it (not even through its cursors); where another one did,
    the UDFs this call already removed are registered again, so nothing is left half done."""
    removed: list[str] = []
    for name in names:
        try:
            con.remove_function(name)
        except duckdb.InvalidInputException as exc:
            if "No function by the name" not in str(exc):
                raise
            _create_udfs(con, removed)
            raise UdfOwnerError(
                f"register(con, replace=True) cannot replace the UDF {name!r}: another Python "
                "connection to this database (or a cursor of it) registered it, and DuckDB "
                "lets only that connection remove it, even after it is closed; call "
                "rms_duck.register(that connection, replace=True), or, when it is closed (a "
                "notebook's earlier connection), close every connection to this database and "
                "connect again; or call rms_duck.register(con) without replace to use the "
                "UDFs already there") from exc
        removed.append(name)


def _create_udfs(con: duckdb.DuckDBPyConnection, names: list[str] | None = None) -> None:
    """Register the UDFs named (all of them by default)."""
    for udf in UDFS:
        if names is None or udf.name in names:
            # The stubs take only enums for type/null_handling and reject list[str]; both work.
            con.create_function(udf.name, udf.function,  # type: ignore[call-overload]
                                list(udf.parameters), udf.return_type,
                                type="arrow", null_handling="special")
    if names is None or "rms_store_udf" in names:
        # It writes (a bundle and a receipt per row), so DuckDB must never fold or skip it.
        con.create_function("rms_store_udf", rms_store_udf,  # type: ignore[call-overload]
                            list(STORE_PARAMETERS), "VARCHAR", type="arrow",
                            null_handling="special", side_effects=True)


def create_stored_objects(con: duckdb.DuckDBPyConnection) -> None:
    """Create every object rms_duck stores in a database (tables, views, persistent macros,
    types, indexes); idempotent. Everything persistent must be created here and only here:
    verification compares a database's stored rms_* objects with what this function
    creates in a fresh in-memory database (duck/shipped.py)."""
    con.execute(read_sql("schema.sql"))
    # The persistent macros carry a digest of their SQL: re-creating them only when it
    # differs keeps connect() cheap; restore_objects() still catches an edited macro body.
    if not persistent_current(con):
        install_persistent_macros(con)


def install_schema(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Create the stored schema and restore changed shipped views and macros (their names)."""
    fresh = not _holds_rms_objects(con)
    create_stored_objects(con)
    # A database that held no rms_* object before holds exactly what was just created, so
    # comparing it with the shipped objects (a fifth of connect()) could only agree.
    restored = []
    if not fresh:
        stored = fingerprints(con)  # listed once for both steps
        upgrade_views(con, stored)  # an earlier release's views: replaced, nothing to warn of
        restored = restore_objects(con, stored)
    if restored:
        warnings.warn(RmsWarning(
            f"restored the shipped definitions of {', '.join(restored)}: the stored ones "
            "differed (an older rms_duck created them, or someone with write access replaced "
            "them); run rms_duck.verify_receipts(con) to see whether receipts were edited too"),
            stacklevel=3)
    if not fresh:
        _warn_shadowing(con)
    return restored


def _warn_shadowing(con: duckdb.DuckDBPyConnection) -> None:
    """A stored macro or type named like a built-in is not rms_duck's to drop (it may be the
    caller's), but ranking queries and the caller's own SQL run through it: say so on every
    writable connect, as the read-only one does through object_problems()."""
    shadows = shadowing_objects(con)
    if shadows:
        drops = "; ".join(drop_statement(name, kind) for name, kind in shadows)
        names = ", ".join(name for name, _ in shadows)
        warnings.warn(RmsWarning(
            f"stored objects shadow DuckDB built-ins: {names}; every query on this database, "
            "ranking queries included, uses them in the built-ins' place (rms_duck's audits "
            f"do not): drop them ({drops}) unless you created them on purpose"), stacklevel=4)


def _refuse_a_used_database(con: duckdb.DuckDBPyConnection) -> None:
    """Packs store in, and audits read, the database the connection was opened on (they run
    on cursors, which start there); after `USE other`, register would install the schema in
    `other`, where no pack would write."""
    (used,), = con.execute("SELECT system.main.current_database()").fetchall()
    cur = con.cursor()
    try:
        (default,), = cur.execute("SELECT system.main.current_database()").fetchall()
    finally:
        cur.close()
    if used != default:
        raise StoredObjectError(
            f"rms_duck.register(con) after USE {used!r}: rms_duck stores bundles in, and "
            f"audits, the database the connection was opened on ({default!r}), so the "
            f"schema would go where no pack writes; register before USE, or open that file "
            f"on a connection of its own: rms_duck.connect(path)")


def _holds_rms_objects(con: duckdb.DuckDBPyConnection) -> bool:
    """Whether a database on this connection stores any rms_* table or view. (Macros need no
    look: without rms_schema_version every shipped macro is re-created anyway, and listing
    functions costs more than the comparison this check saves.) The catalogs are read
    through system.main and the names compared here: a stored `lower` macro made the SQL
    comparison find nothing, so a writable connect took a tampered file for a new one and
    neither restored nor reported its changed views. Any database counts: saying yes too
    often only costs the comparison."""
    names = con.execute(
        "SELECT database_name, table_name FROM system.main.duckdb_tables() "
        "UNION ALL SELECT database_name, view_name FROM system.main.duckdb_views() "
        "WHERE NOT internal").fetchall()
    return any(db not in ("system", "temp") and name[:4].lower() == "rms_"
               for db, name in names)


def _clear_udf_names(con: duckdb.DuckDBPyConnection, read_only: bool) -> None:
    """Drop stored macros named like rms_duck's UDFs: DuckDB would call them instead."""
    names = [u.name for u in UDFS]
    blocking = con.execute(
        "SELECT DISTINCT function_name, function_type FROM system.main.duckdb_functions() "
        "WHERE database_name NOT IN ('system', 'temp') AND function_type IN "
        "('macro', 'table_macro') AND list_contains(?, lower(function_name)) ORDER BY 1",
        [names]).fetchall()
    if not blocking:
        return
    listed = ", ".join(name for name, _ in blocking)
    if read_only:
        raise StoredObjectError(
            f"the database stores macros named like rms_duck's own functions ({listed}); "
            "DuckDB would run them instead of rms_duck's. Open the file writable once with "
            "rms_duck.connect(path) to drop them, or audit it with `rms-duck audit --db PATH`, "
            "which does not need them")
    for name, kind in blocking:
        table = "TABLE " if kind == "table_macro" else ""
        con.execute(f"DROP MACRO {table}IF EXISTS {sql_identifier(name)}")
    warnings.warn(RmsWarning(
        f"dropped stored macros named like rms_duck's own functions ({listed}): someone with "
        "write access created them; run rms_duck.verify_receipts(con) to see whether receipts "
        "were edited too"), stacklevel=3)


def _warn_changed(con: duckdb.DuckDBPyConnection) -> None:
    """On a read-only file nothing can be restored: say what differs instead."""
    odd = [p.name for p in object_problems(con) if p.problem != "STORED_OBJECT_MISSING"]
    if odd:
        warnings.warn(RmsWarning(
            f"stored objects differ from the shipped ones: {', '.join(odd)}; rms_duck's own "
            "checks ignore them, but SQL that reads them may be misled; run "
            "rms_duck.verify_receipts(con) for details, and open the file writable once with "
            "rms_duck.connect(path) to restore shipped views, macros and types"), stacklevel=3)


def _read_only(con: duckdb.DuckDBPyConnection) -> bool:
    rows = con.execute(
        "SELECT readonly FROM system.main.duckdb_databases() "
        "WHERE database_name = system.main.current_database()"
    ).fetchall()
    return bool(rows and rows[0][0])

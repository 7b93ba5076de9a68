"""The SQL objects rms_duck ships, read from the package, and how a database differs from them.

Audits must not trust SQL stored in the database they audit: a writer can replace a view
(`CREATE OR REPLACE VIEW rms_receipt_problems AS ... WHERE false`) or shadow a built-in
function with a macro (`CREATE MACRO sha256(x) AS ...`, which DuckDB resolves before the
built-in). So verification runs the view text from the package's schema.sql as an inline
query, and every stored rms_* view, macro, type and table (and the pack_context stand-in)
is compared with what the same files create in a fresh in-memory database; each difference
is reported as a problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache

import duckdb

from ..escape import sql_identifier
from .sqlfiles import read_sql

# Files whose statements create the objects stored in a database, run in this order by
# connection.create_stored_objects(); shipped_statements() reads their CREATE statements.
# (the macro files: sql/python_stubs.sql, macros.sql, ranking.sql; see duck/macros.py)
SCHEMA_FILES = ("schema.sql", "python_stubs.sql", "macros.sql", "ranking.sql")
# The tables verification, replay and the audit read.
AUDIT_TABLES = ("rms_receipts", "rms_bundles", "rms_nodes", "rms_line_costs")

_CREATE = re.compile(
    r"CREATE\s+(?:OR\s+REPLACE\s+)?(?:TEMP\s+|TEMPORARY\s+)?(TABLE|VIEW|MACRO|TYPE)\s+"
    r"(?:IF\s+NOT\s+EXISTS\s+)?(\w+)(?:\s+AS)?", re.IGNORECASE)
_LEADING_COMMENTS = re.compile(r"^(?:\s*--[^\n]*\n)*\s*")


@dataclass(frozen=True, slots=True)
class ObjectProblem:
    """A stored object that is not what rms_duck ships: a code, the object and the fix."""

    problem: str
    name: str
    detail: str


@cache
def shipped_statements() -> dict[str, tuple[str, str]]:
    """name -> (kind, CREATE statement text) for every object the schema files create."""
    out: dict[str, tuple[str, str]] = {}
    for name in SCHEMA_FILES:
        for statement in duckdb.extract_statements(read_sql(name)):
            text = _LEADING_COMMENTS.sub("", statement.query).rstrip().rstrip(";")
            match = _CREATE.match(text)
            if match:
                out[match.group(2).lower()] = (match.group(1).upper(), text)
    return out


def view_query(name: str) -> str:
    """The SELECT of a shipped view, as text (no CREATE), from the package's schema.sql."""
    kind, text = shipped_statements()[name]
    match = _CREATE.match(text)
    if kind != "VIEW" or match is None:
        raise KeyError(f"{name} is a shipped {kind}, not a view")
    return text[match.end():].strip()


def with_views(sql: str, *names: str) -> str:
    """`sql` preceded by the shipped views as CTEs of the same names, which take precedence
    over whatever views the database stores under those names. List dependencies first."""
    ctes = ",\n".join(f"{name} AS (\n{view_query(name)}\n)" for name in names)
    return f"WITH {ctes}\n{sql}"


def restore_statement(name: str) -> str:
    """The shipped CREATE statement of a view or macro, made to replace what is stored."""
    _kind, text = shipped_statements()[name]
    return re.sub(r"^CREATE\s+(\w+)\s+IF\s+NOT\s+EXISTS", r"CREATE OR REPLACE \1", text,
                  count=1, flags=re.IGNORECASE)


def fingerprints(con: duckdb.DuckDBPyConnection) -> dict[str, tuple[str, str]]:
    """name -> (kind, definition) for the rms_* objects stored in the current database, and
    the shipped ones named otherwise (pack_context).

    Names are matched without regard to case, as DuckDB resolves them: RMS_RECEIPT_PROBLEMS
    is the view a query of rms_receipt_problems reads. The catalogs are read through
    system.main and the names compared here, never with SQL functions the audited file
    could store a macro for: with a stored `lower` (returning upper case) the comparison
    found no rms_* object, so verification and a writable connect's restore saw nothing."""
    (current,), = con.execute("SELECT system.main.current_database()").fetchall()
    where = "WHERE database_name = ? AND schema_name = 'main'"
    unprefixed = set(_unprefixed_names())

    def tracked(name: str, *, macro: bool = False) -> bool:
        low = name.lower()
        return low.startswith("rms_") or (macro and low in unprefixed)

    out: dict[str, tuple[str, str]] = {}
    for name, sql in con.execute(
            f"SELECT view_name, sql FROM system.main.duckdb_views() {where} AND NOT internal",
            [current]).fetchall():
        if tracked(name):
            out[name.lower()] = ("VIEW", sql)
    macros: dict[str, list[str]] = {}
    for name, kind, definition, params in con.execute(
            f"SELECT function_name, function_type, macro_definition, parameters "
            f"FROM system.main.duckdb_functions() {where} AND NOT internal "
            "AND function_type IN ('macro', 'table_macro')", [current]).fetchall():
        if tracked(name, macro=True):
            macros.setdefault(name.lower(), []).append(
                f"{kind}({', '.join(params)}): {definition}")
    out.update({name: ("MACRO", "\n".join(sorted(d))) for name, d in macros.items()})
    tables: dict[str, list[str]] = {}
    for name, column, dtype, nullable, default in con.execute(
            f"SELECT table_name, column_name, data_type, is_nullable, column_default "
            f"FROM system.main.duckdb_columns() {where} AND NOT internal "
            "ORDER BY table_name, column_index", [current]).fetchall():
        if tracked(name):
            tables.setdefault(name.lower(), []).append(f"{column} {dtype} {nullable} {default}")
    # Keys too: a table rebuilt without its primary key (its column kept NOT NULL) looks the
    # same column by column, yet then holds two rows of one bundle, which no check reads.
    keys: dict[str, list[str]] = {}
    for name, kind, columns in con.execute(
            f"SELECT table_name, constraint_type, constraint_column_names "
            f"FROM system.main.duckdb_constraints() {where} "
            "AND constraint_type IN ('PRIMARY KEY', 'UNIQUE', 'FOREIGN KEY')",
            [current]).fetchall():
        if tracked(name):
            keys.setdefault(name.lower(), []).append(f"{kind} ({', '.join(columns)})")
    for name, found in keys.items():
        tables.setdefault(name, []).extend(sorted(found))
    for (name,) in con.execute(
            f"SELECT table_name FROM system.main.duckdb_tables() {where} AND NOT internal",
            [current]).fetchall():
        if tracked(name):
            out[name.lower()] = ("TABLE", "\n".join(tables.get(name.lower(), [])))
    for (name,) in con.execute(
            f"SELECT type_name FROM system.main.duckdb_types() {where} AND NOT internal",
            [current]).fetchall():
        if tracked(name):
            # The name comes from the audited file: quote it as an identifier, never splice
            # it raw.
            row = con.execute(
                f"SELECT system.main.typeof(CAST(NULL AS {sql_identifier(name)}))").fetchone()
            out[name.lower()] = ("TYPE", row[0] if row else "")
    return out


@cache
def _unprefixed_names() -> list[str]:
    """Shipped objects named without rms_ (the pack_context stand-in): checked all the same,
    or a file could replace the stand-in plain clients call and verification say nothing."""
    return sorted(name for name in shipped_statements() if not name.startswith("rms_"))


@cache
def _reference() -> dict[str, tuple[str, str]]:
    """What the shipped schema files store, as DuckDB itself renders it (this version)."""
    from .connection import create_stored_objects  # connection imports this module

    con = duckdb.connect()
    try:
        create_stored_objects(con)
        return fingerprints(con)
    finally:
        con.close()


# The whole fields of the candidate type were INTEGER until 2026-12-02; BIGINT lets a value
# past 32 bits reach the Python checks, which name the candidate, the field and the value.
_WIDENED_FIELDS = ("path_count", "session_position", "token_cost_estimate")


@cache
def _earlier_shipped() -> dict[str, tuple[str, str]]:
    """Definitions an earlier rms_duck stored that this one still accepts as shipped: a file
    keeps what created it (`CREATE ... IF NOT EXISTS` leaves it; a table cannot be re-created
    without its data). The generated rms_nodes.token_cost_estimate changed its text, not its
    values; rms_candidate's whole fields were INTEGER, which packs still read the same way."""
    from ..tokens.estimate import earlier_stored_estimate_sql, stored_estimate_sql

    con = duckdb.connect()
    try:
        # DuckDB's own rendering of each expression, as duckdb_columns() shows it.
        con.execute(f"CREATE TABLE now (content VARCHAR, e INTEGER GENERATED ALWAYS AS "
                    f"({stored_estimate_sql()}) VIRTUAL, o INTEGER GENERATED ALWAYS AS "
                    f"({earlier_stored_estimate_sql()}) VIRTUAL)")
        (new,), (old,) = con.execute(
            "SELECT column_default FROM duckdb_columns() WHERE table_name = 'now' "
            "AND column_name IN ('e', 'o') ORDER BY column_name").fetchall()
    finally:
        con.close()
    kind, definition = _reference()["rms_nodes"]
    type_kind, type_text = _reference()["rms_candidate"]
    for field in _WIDENED_FIELDS:
        type_text = type_text.replace(f"{field} BIGINT", f"{field} INTEGER")
    return {"rms_nodes": (kind, definition.replace(new, old)),
            "rms_candidate": (type_kind, type_text), **earlier_views(), **_earlier_macros()}


# Macros as files made before 2026-12-04 store them, until a writable connect() re-creates
# the persistent macros: the rms_replay stand-in had only an `error` column (a plain client's
# `SELECT seq, ... FROM rms_replay()` failed to bind instead of saying to register), and
# rms_receipt_id took a bundle_id match as readily as a receipt_id one.
_EARLIER_MACROS = {
    "rms_replay": """CREATE MACRO rms_replay(rid := NULL) AS TABLE
    SELECT CAST(NULL AS VARCHAR) AS error FROM range(1)
    WHERE CAST(error('rms_replay() runs Python: call rms_duck.register(con) on this connection '
                     || 'first (rms_verify_receipts() needs no Python)') AS BOOLEAN)""",
    "rms_receipt_id": """CREATE MACRO rms_receipt_id(rid) AS
    CASE WHEN rid IS NOT NULL THEN coalesce(
    (SELECT any_value(r.receipt_id) FROM rms_receipts AS r
      WHERE TRY_CAST(rid AS UUID) IN (r.receipt_id, r.bundle_id)),
    error('unknown receipt ' || to_json(CAST(rid AS VARCHAR))
          || '; pass a receipt_id or bundle_id from rms_receipts')) END""",
}


def _earlier_macros() -> dict[str, tuple[str, str]]:
    """The earlier macros as fingerprints() renders them: those above, and the ranking
    macros of sql/earlier_macros.sql (as files made before 2026-12-04 store them)."""
    from .connection import create_stored_objects  # connection imports this module

    texts = list(_EARLIER_MACROS.values()) + [
        statement.query for statement in duckdb.extract_statements(read_sql(EARLIER_MACRO_FILE))]
    names = set()
    con = duckdb.connect()
    try:
        create_stored_objects(con)  # the tables the earlier macros read must exist
        for text in texts:
            text = _LEADING_COMMENTS.sub("", text)
            match = _CREATE.match(text)
            if match is not None:
                names.add(match.group(2).lower())
                con.execute(re.sub(r"^CREATE\s+(?:OR\s+REPLACE\s+)?MACRO",
                                   "CREATE OR REPLACE MACRO", text, count=1,
                                   flags=re.IGNORECASE))
        stored = fingerprints(con)
        return {name: stored[name] for name in sorted(names)}
    finally:
        con.close()


EARLIER_MACRO_FILE = "earlier_macros.sql"
# Objects shipped since then, which a file of the earlier release lacks: each is accepted as
# missing while the object named here, which calls it, is still stored as the earlier release
# made it (a file of today's release missing it is reported).
_ADDED_SINCE_EARLIER = {"rms_bm25_k1": "rms_bm25", "rms_count_arg": "rms_feedback_terms"}


def _missing_by_release(name: str, stored: dict[str, tuple[str, str]]) -> bool:
    """Whether `name` is absent only because the file predates it."""
    caller = _ADDED_SINCE_EARLIER.get(name)
    if caller is None:
        return False
    earlier = _earlier_shipped().get(caller)
    return earlier is not None and stored.get(caller) == earlier


# Views an earlier release stored otherwise, with each edit since: (new text, old text).
# Until 2026-12-02 the monitoring views' float aggregates had no ORDER BY, so on a large
# store they added in thread order and their last bits changed from run to run.
_VIEW_EDITS = {
    # Until 2026-12-04 it had no has_content column (receipt version 7 records it).
    "rms_receipt_decisions": (
        ('"position": "INTEGER",\n                        "has_content": "BOOLEAN"}]',
         '"position": "INTEGER"}]'),
        ("AS content_sha256,\n       struct_extract(c, 'has_content') AS has_content\n",
         "AS content_sha256\n"),
    ),
    "rms_session_metrics": (
        ("avg(str ORDER BY str)", "avg(str)"),
        ("\n                THEN regr_slope(str_mean, turn ORDER BY turn) END AS str_mean_trend,",
         " THEN regr_slope(str_mean, turn) END\n               AS str_mean_trend,"),
        ("\n                THEN regr_slope(budget_waste, turn ORDER BY turn) END "
         "AS budget_waste_trend",
         " THEN regr_slope(budget_waste, turn) END\n               AS budget_waste_trend"),
    ),
    "rms_query_shapes": (
        ("avg(b.str_mean ORDER BY b.str_mean) AS str_mean,\n       avg(b.budget_efficiency "
         "ORDER BY b.budget_efficiency) AS budget_efficiency,\n       avg(b.budget_waste "
         "ORDER BY b.budget_waste) AS budget_waste",
         "avg(b.str_mean) AS str_mean, avg(b.budget_efficiency) AS budget_efficiency,\n"
         "       avg(b.budget_waste) AS budget_waste"),
    ),
}


@cache
def earlier_views() -> dict[str, tuple[str, str]]:
    """The views an earlier rms_duck stored, as DuckDB renders them: verification accepts
    them, and a writable connect() replaces them silently (upgrade_views)."""
    from .connection import create_stored_objects  # connection imports this module

    con = duckdb.connect()
    try:
        create_stored_objects(con)
        for name, edits in _VIEW_EDITS.items():
            text = restore_statement(name)
            for new, old in edits:
                if new not in text:
                    raise RuntimeError(f"schema.sql changed {name}: update _VIEW_EDITS")
                text = text.replace(new, old)
            con.execute(text)
        stored = fingerprints(con)
        return {name: stored[name] for name in _VIEW_EDITS}
    finally:
        con.close()


def upgrade_views(con: duckdb.DuckDBPyConnection,
                  stored: dict[str, tuple[str, str]]) -> list[str]:
    """Replace, without a warning, each view still stored as an earlier rms_duck made it.
    `stored` is fingerprints(con), brought up to date here (listing them costs ~40 ms)."""
    if all(stored.get(name) == _reference()[name] for name in _VIEW_EDITS):
        return []  # the usual case: earlier_views() builds a database of its own
    upgraded = [name for name, old in earlier_views().items() if stored.get(name) == old]
    for name in upgraded:
        con.execute(restore_statement(name))
        stored[name] = _reference()[name]
    return upgraded


def object_problems(con: duckdb.DuckDBPyConnection,
                    stored: dict[str, tuple[str, str]] | None = None) -> list[ObjectProblem]:
    """Every rms_* object that differs from the shipped one, is missing or is not shipped,
    and every stored macro that shadows a built-in function. Reads only."""
    stored = fingerprints(con) if stored is None else stored
    shipped = _reference()
    problems = []
    for name, (kind, definition) in sorted(shipped.items()):
        have = stored.get(name)
        if have is None and _missing_by_release(name, stored):
            continue
        if have is None:
            where = ("verification cannot run" if name in AUDIT_TABLES
                     else "plain DuckDB clients lack it")
            problems.append(ObjectProblem("STORED_OBJECT_MISSING", name, (
                f"the {kind.lower()} {name} is missing ({where}): it was dropped, or this is "
                "not an rms_duck database; restore it from a backup, or open the file "
                "writable once with rms_duck.connect(path) to re-create what can be")))
        elif have != (kind, definition) and have != _earlier_shipped().get(name):
            # Named against the accepted definition it is closest to: a file created with
            # the earlier column spelling that lost a key must be told of the key.
            nearest = min([(kind, definition), *filter(None, [_earlier_shipped().get(name)])],
                          key=lambda accepted: _changed_lines(have, accepted))
            problems.append(ObjectProblem("STORED_OBJECT_CHANGED", name, (
                f"the stored {have[0].lower()} {name} differs from the shipped {kind.lower()}; "
                "verification ignores it and runs the shipped SQL, but plain DuckDB clients "
                f"reading it may be misled; {_difference(have, nearest)}; "
                "rms_duck.connect(path) on a writable file restores shipped views, macros and "
                "types")))
    for name, (kind, definition) in sorted(stored.items()):
        if name not in shipped:
            problems.append(ObjectProblem("STORED_OBJECT_UNKNOWN", name, (
                f"the {kind.lower()} {name} is not shipped by rms_duck but uses its rms_ "
                f"prefix (the ranking-query guard trusts rms_* table macros): "
                f"{_short(definition)}; drop it unless you created it yourself")))
    for name, kind in shadowing_objects(con):
        what = "type" if kind == "type" else "function"
        problems.append(ObjectProblem("STORED_OBJECT_SHADOWS", name, (
            f"the stored {kind.replace('_', ' ')} {name} has the name of a built-in {what}, "
            f"so any query in this database using that {what} gets the stored one instead; "
            f"SQL audits here cannot be trusted: drop it ({drop_statement(name, kind)})")))
    return problems


def shadowing_objects(con: duckdb.DuckDBPyConnection) -> list[tuple[str, str]]:
    """(name, 'macro', 'table_macro' or 'type') of each stored macro named like a built-in
    function and each stored type named like a built-in type (JSON, which an extension
    provides, can be created again): DuckDB uses them in the built-in's place.

    The catalog is read through system.main, and compared here rather than with SQL
    functions: a stored table macro named duckdb_functions, or a macro named lower, would
    otherwise decide what this check sees, and hide itself with the rest."""
    functions = con.execute(
        "SELECT database_name, function_name, function_type, internal "
        "FROM system.main.duckdb_functions()").fetchall()
    types = con.execute(
        "SELECT database_name, type_name, internal FROM system.main.duckdb_types()").fetchall()
    builtin_functions = {name.lower() for db, name, _, _ in functions if db == "system"}
    builtin_types = {name.lower() for db, name, _ in types if db == "system"}
    found = {(name, kind) for db, name, kind, internal in functions
             if db not in ("system", "temp") and not internal
             and kind in ("macro", "table_macro") and name.lower() in builtin_functions}
    found |= {(name, "type") for db, name, internal in types
              if db not in ("system", "temp") and not internal
              and name.lower() in builtin_types}
    return sorted(found)


def drop_statement(name: str, kind: str) -> str:
    """The statement that drops a stored macro or type of this kind."""
    what = {"table_macro": "MACRO TABLE", "type": "TYPE"}.get(kind, "MACRO")
    return f"DROP {what} {sql_identifier(name) if not name.isidentifier() else name}"


def restore_objects(con: duckdb.DuckDBPyConnection,
                    stored: dict[str, tuple[str, str]] | None = None) -> list[str]:
    """Re-create shipped views, macros and types that were changed; returns their names.

    Tables and objects that are not shipped are left alone (data, or the caller's). A type
    is restored too: pack_context and rms_store cast their candidates to rms_candidate, so
    an edited one (a field renamed or narrowed) would change packs without a word.

    Raises:
        StoredObjectError: a changed type cannot be replaced (a table uses it).
    """
    from ..errors import StoredObjectError

    restored = []
    shipped = shipped_statements()
    stored = fingerprints(con) if stored is None else stored
    for problem in object_problems(con, stored):
        kind = shipped.get(problem.name, ("",))[0]
        if problem.problem == "STORED_OBJECT_CHANGED" and kind in ("VIEW", "MACRO", "TYPE"):
            stored_kind = stored.get(problem.name, ("",))[0]
            if stored_kind not in ("", kind):
                continue  # a table where a view belongs: data, never dropped here
            try:
                con.execute(restore_statement(problem.name))
            except duckdb.Error as exc:
                if kind != "TYPE":
                    raise
                raise StoredObjectError(
                    f"the stored type {problem.name} differs from the shipped one and cannot "
                    f"be restored ({str(exc).splitlines()[0]}); pack_context and rms_store "
                    f"cast candidates to it, so they would pack changed values: drop what "
                    f"depends on it, then connect again") from None
            restored.append(problem.name)
    return restored


def _changed_lines(stored: tuple[str, str], shipped: tuple[str, str]) -> int:
    have, want = set(stored[1].splitlines()), set(shipped[1].splitlines())
    return len(have ^ want)


def _difference(stored: tuple[str, str], shipped: tuple[str, str]) -> str:
    """What a changed table lacks and adds, line by line (a column, or a key); for views
    and macros, the stored definition."""
    if stored[0] != "TABLE" or shipped[0] != "TABLE":
        return f"stored definition: {_short(stored[1])}"
    have, want = stored[1].splitlines(), shipped[1].splitlines()
    lacks = [line for line in want if line not in have]
    adds = [line for line in have if line not in want]
    parts = ([f"it lacks {_short('; '.join(lacks))}"] if lacks else []) + (
        [f"it has {_short('; '.join(adds))} instead"] if adds else [])
    return ", ".join(parts) or f"stored definition: {_short(stored[1])}"


def _short(text: str) -> str:
    text = " ".join(text.split())
    return repr(text if len(text) <= 160 else text[:157] + "...")

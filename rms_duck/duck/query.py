"""Ranking queries from callers: one read-only SELECT, checked with sqlglot, made canonical.

The guard allow-lists what it accepts and rejects everything else: statement kinds (only
SELECT and set operations), and functions in FROM (only range, generate_series, unnest,
json_each, json_tree and the rms_* table macros). It also rejects what sqlglot parses
leniently (CHECKPOINT as a column, SELECT ... INTO as a plain select), quoted file paths and
URLs in FROM (DuckDB replacement scans), and scalar functions that read files, change state
or reach secrets. Given the database's table names, it also rejects any unknown name in
FROM, since DuckDB reads an unknown dotted name such as data.csv as a file. A query in
another dialect is transpiled to DuckDB and the result is guarded again, since that is
what runs. Execution then happens inside a READ ONLY transaction, which blocks writes to
the database (not file reads or settings: the guard is the wall for those).

Settings, logging and catalog functions and views are rejected too: they expose file paths
(current_setting, duckdb_databases, pg_settings) or other sessions' query text (duckdb_logs).
The guard's work is linear in the query's size, and a query longer than MAX_QUERY_CHARS or
nested deeper than the parser's recursion allows is rejected with a clear error.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from ..errors import QueryRejectedError

_ROOTS = (exp.Select, exp.Union, exp.Intersect, exp.Except)
_FORBIDDEN_NODES = tuple(
    node for node in (
        getattr(exp, name, None) for name in (
            "Insert", "Update", "Delete", "Merge", "Create", "Drop", "Alter", "AlterTable",
            "Command", "Copy", "Attach", "Detach", "Pragma", "Set", "Use", "Transaction",
            "Commit", "Rollback", "Install", "Load", "Export", "Describe", "Summarize",
            "Into", "LoadData", "TruncateTable", "Grant", "Revoke",
        )
    ) if node is not None
)
# Scalar functions that read files, touch sequences, variables, secrets, settings or
# logs, sleep, pack, or store. json_serialize_plan binds (and with optimize:=true folds) the
# SQL in its string argument, out of the guard's sight: it returned current_setting() values
# and told which files exist (rms_store commits a bundle and receipt through a cursor of
# its own, which the query's READ ONLY transaction does not cover).
_FILE_FUNCTIONS = re.compile(
    r"^(read_\w+|glob|sniff_csv|parquet_\w+|iceberg_\w+|delta_scan|json_scan\w*|"
    r"duckdb_secrets|which_secret|getvariable|setvariable|nextval|currval|setval|setseed|"
    r"write_log|json_execute_serialized_sql|json_serialize_plan|\w+_external_resource\w*|"
    r"query|query_table|postgres_\w+|sqlite_\w+|mysql_\w+|httpfs\w*|load_\w+|"
    r"install_\w+|pragma_\w+|checkpoint|force_checkpoint|export_\w+|import_\w+|"
    r"enable_logging|disable_logging|truncate_duckdb_logs|duckdb_\w+|arrow_scan\w*|"
    r"pandas_scan|python_\w+|enable_profiling|disable_profiling|"
    r"current_setting|current_query|pg_\w+|getenv|set_config|sleep\w*|"
    r"rms_pack_udf|rms_replay_udf|pack_context|rms_store|rms_store_udf)$",
    re.IGNORECASE,
)
# Functions allowed in FROM / JOIN; everything else there is rejected by default.
_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest", "json_each", "json_tree"})
_PATH_CHARS = re.compile(r"[/\\:*?.]")
_FILE_SUFFIX = re.compile(
    r"\.(csv|tsv|txt|text|parquet|json|jsonl|ndjson|geojson|avro|xlsx|xls|arrow|feather|ipc|"
    r"orc|gz|zst|bz2|xz|zip|db|duckdb|sqlite|sqlite3|blob)$", re.IGNORECASE)
# System catalogs and views: settings, file paths, extensions, and the query log.
_SYSTEM_SCHEMAS = frozenset({"information_schema", "pg_catalog", "system"})
_SYSTEM_VIEWS = re.compile(r"^(duckdb_\w+|pg_\w+|sqlite_\w+|pragma_\w+)$", re.IGNORECASE)
MAX_QUERY_CHARS = 100_000
# DuckDB folds identifiers in ASCII only: Python's lower() maps a Kelvin sign to k, Ä to ä.
ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_SELECT_WORDS = {"SELECT", "WITH", "FROM", "VALUES", "TABLE"}
_LEADING_WORD = re.compile(r"^(?:\s+|--[^\n]*\n?|/\*.*?\*/|\()*([A-Za-z_]+)", re.DOTALL)


@dataclass(frozen=True, slots=True)
class CheckedQuery:
    """A guarded query: DuckDB SQL to run, plus its canonical form and fingerprint."""

    sql: str
    canonical: str
    fingerprint: str
    dialect: str
    sqlglot_version: str
    tables: tuple[str, ...] = ()  # the tables and views it reads (lower case, as written)
    # Its placeholders as written: '?' for each positional one, else the name ($q, $1).
    placeholders: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"sql": self.canonical, "fingerprint": self.fingerprint, "dialect": self.dialect,
                "sqlglot_version": self.sqlglot_version, "tables": list(self.tables)}


def check_query(sql: str, dialect: str = "duckdb", *,
                tables: Collection[str] | Callable[[tuple[str, ...]], Collection[str]] | None
                = None) -> CheckedQuery:
    """Accept exactly one read-only SELECT; return it transpiled to DuckDB.

    Args:
        sql: the caller's ranking query.
        dialect: the sqlglot dialect it is written in (postgres, snowflake, bigquery, ...).
        tables: the lower-cased names of the tables and views that exist (bare,
            schema-qualified and catalog-qualified), or a function from the names the query
            reads to them (which names are valid can depend on where the query will run).
            When given, any other name in FROM is rejected: DuckDB turns an unknown name
            into a file scan ("data.csv").

    Returns:
        The DuckDB SQL to run, its canonical text and its literal-free fingerprint.

    Raises:
        QueryRejectedError: anything else, with the reason and the fix.

    >>> check_query("select ID from MEM where score > 0.5").canonical
    'SELECT id FROM mem WHERE score > 0.5'
    """
    if not isinstance(sql, str) or not sql.strip():
        raise QueryRejectedError(
            f"ranking query must be one SELECT statement, got {sql!r}; "
            "pass for example 'SELECT id, score, content FROM rms_nodes'")
    try:
        sql.encode("utf-8")
    except UnicodeEncodeError as exc:
        # DuckDB said only "Python Conversion Failure: cannot encode str as UTF-8".
        raise QueryRejectedError(
            f"ranking query holds a lone surrogate ({sql[exc.start]!r} at character "
            f"{exc.start}, half of a UTF-16 pair), which DuckDB cannot take as text; fix the "
            "text, for example sql.encode('utf-8', 'replace').decode()") from None
    if len(sql) > MAX_QUERY_CHARS:
        raise QueryRejectedError(
            f"ranking query is {len(sql):,} characters long, more than the {MAX_QUERY_CHARS:,} "
            "allowed; rank with a shorter query (put long value lists in a table and join it)")
    try:
        tree = _parse_one(sql, dialect)
        read = tables_read(tree)
        known = None if tables is None else frozenset(
            tables(read) if callable(tables) else tables)
        _check_tree(tree, sql, known)
        duck_sql = tree.sql(dialect="duckdb")
        if dialect != "duckdb":
            # Transpiled text is new input, not trusted output: guard what will actually run.
            _check_tree(_parse_one(duck_sql, "duckdb"), sql, known)
        canonical = normalize_identifiers(tree.copy(), dialect="duckdb").sql(
            dialect="duckdb", comments=False, normalize=True)
        return CheckedQuery(duck_sql, canonical, fingerprint(tree), dialect,
                            sqlglot.__version__, read,
                            tuple(node.name for node in tree.find_all(exp.Placeholder)))
    except RecursionError:
        raise QueryRejectedError(
            f"ranking query is nested too deeply to check in {_show(sql)}; remove redundant "
            "parentheses or split the nesting into CTEs") from None


def tables_read(tree: exp.Expr) -> tuple[str, ...]:
    """The tables and views a query names in FROM and JOIN, CTEs in scope left out, sorted."""
    in_scope = cte_scopes()
    names = set()
    for node in tree.find_all(exp.Table):
        if isinstance(node.this, exp.Identifier):
            dotted = ".".join(part.name for part in node.parts).translate(ASCII_LOWER)
            if not (len(node.parts) == 1 and dotted in in_scope(node)):
                names.add(dotted)
    return tuple(sorted(names))


def cte_scopes() -> Callable[[exp.Expr], frozenset[str]]:
    """A function giving the CTE names a node may read, as DuckDB scopes them: those of
    every enclosing WITH, but inside a CTE's body only the CTEs before it in its own WITH
    (and itself, when RECURSIVE, in the recursive term only). A name from a WITH elsewhere
    in the query is not in scope: DuckDB reads it as a table, or through its replacement
    scan as a file or a Python variable (review of stop 24: `FROM (WITH secret AS (...)
    ...) t, secret`). Names fold in ASCII only, as DuckDB folds them (ASCII_LOWER).

    Each node's set is derived from its parent's, remembered, so a query costs linear time.
    """
    memo: dict[int, frozenset[str]] = {}

    def visible(node: exp.Expr) -> frozenset[str]:
        chain = []
        step: exp.Expr | None = node
        while step is not None and id(step) not in memo:
            chain.append(step)
            step = step.parent
        for child in reversed(chain):
            memo[id(child)] = _scope_of(child, memo)
        return memo[id(node)]

    return visible


def _scope_of(node: exp.Expr, memo: dict[int, frozenset[str]]) -> frozenset[str]:
    parent = node.parent
    if parent is None:
        return frozenset()
    above = memo[id(parent)]
    if isinstance(parent, exp.With):  # node is one of its CTEs: the ones before it
        names = []
        for cte in parent.expressions:
            if cte is node:
                break
            names.append(cte.alias_or_name.translate(ASCII_LOWER))
        return above | frozenset(names)
    if (isinstance(parent, exp.Union) and node.arg_key == "expression"
            and not parent.args.get("by_name")):
        # DuckDB binds a RECURSIVE CTE's own name only in the recursive term: the right
        # side of the UNION that is its whole body. Elsewhere (the anchor, a body that is
        # not a UNION, a UNION BY NAME, which DuckDB never makes recursive) the name is
        # looked up outside, down to the replacement scan.
        body: exp.Expr = parent
        while isinstance(body.parent, exp.Subquery):
            body = body.parent
        cte = body.parent
        if (isinstance(cte, exp.CTE) and body.arg_key == "this"
                and isinstance(cte.parent, exp.With) and cte.parent.args.get("recursive")):
            return above | {cte.alias_or_name.translate(ASCII_LOWER)}
    with_ = parent.args.get("with_") or parent.args.get("with")  # sqlglot 30 names it with_
    if isinstance(with_, exp.With) and with_ is not node:
        return above | frozenset(cte.alias_or_name.translate(ASCII_LOWER)
                                 for cte in with_.expressions)
    return above


def fingerprint(tree: exp.Expr) -> str:
    """sha256 of the canonical SQL with every literal replaced by '?': the query's shape."""
    shape = normalize_identifiers(tree.copy(), dialect="duckdb")
    for node in list(shape.find_all(exp.Literal)):
        _swap(node, exp.Placeholder())
    text = shape.sql(dialect="duckdb", comments=False, normalize=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _swap(node: exp.Expr, new: exp.Expr) -> None:
    """node.replace(new) in constant time (replace() searches the parent's list: quadratic
    over an IN list of thousands of literals)."""
    parent, key, index = node.parent, node.arg_key, node.index
    if parent is None or key is None:
        return
    if index is None:
        parent.args[key] = new
    else:
        parent.args[key][index] = new
    new.parent, new.arg_key, new.index = parent, key, index


def _parse(sql: str, dialect: str) -> list[exp.Expr | None]:
    """sqlglot.parse(sql, read=dialect), except that a placeholder cast (?::INT) is one.

    sqlglot's tokenizer reads `?::` as one token in every dialect, Databricks' try-cast
    operator, which only the Databricks parser knows: elsewhere WHERE ts > ?::TIMESTAMP
    failed as "Invalid expression / Unexpected token". Outside Databricks the token is
    split into the placeholder and the cast it is there."""
    from sqlglot.dialects.dialect import Dialect
    from sqlglot.tokens import Token, TokenType

    read = Dialect.get_or_raise(dialect)
    tokens = read.tokenize(sql)
    if TokenType.QDCOLON not in read.parser_class.COLUMN_OPERATORS:
        split: list[Token] = []
        for token in tokens:
            if token.token_type is not TokenType.QDCOLON:
                split.append(token)
                continue
            split.append(Token(TokenType.PLACEHOLDER, "?", token.line, token.col - 2,
                               token.start, token.start, token.comments))
            split.append(Token(TokenType.DCOLON, "::", token.line, token.col, token.start + 1,
                               token.end))
        tokens = split
    return read.parser().parse(tokens, sql)


def _parse_one(sql: str, dialect: str) -> exp.Expr:
    quiet = logging.getLogger("sqlglot")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its "falling back to Command" warnings are ours to report
    try:
        statements = [s for s in _parse(sql, dialect) if s is not None]
    except (ParseError, SqlglotError) as exc:
        word = _leading_word(sql)
        if word and word not in _SELECT_WORDS:
            raise _reject(f"{word} statement", sql) from None
        raise QueryRejectedError(
            f"ranking query could not be parsed as {dialect} SQL: {str(exc).splitlines()[0]} "
            f"in {_show(sql)}; pass one SELECT (or name its dialect with dialect=...)"
        ) from None
    except ValueError as exc:
        raise QueryRejectedError(
            f"unknown SQL dialect {dialect!r} ({exc}); use a sqlglot dialect name such as "
            "'duckdb', 'postgres', 'snowflake' or 'bigquery'") from None
    finally:
        quiet.setLevel(level)
    if len(statements) != 1:
        fix = ("remove the extra statements" if statements
               else "pass for example 'SELECT id, score, content FROM rms_nodes'")
        raise QueryRejectedError(
            f"ranking query must be exactly one statement, got {len(statements)} in "
            f"{_show(sql)}; {fix}")
    return statements[0]


def _check_tree(tree: exp.Expr, sql: str, tables: frozenset[str] | None) -> None:
    if not isinstance(tree, _ROOTS):
        raise _reject(f"{_statement_kind(tree, sql)} statement", sql)
    in_scope = cte_scopes()
    for node in tree.walk():
        if isinstance(node, exp.Lateral) and isinstance(node.this, exp.Func):
            _check_table_function(node.this, sql)
        if (isinstance(node, exp.Lateral) and isinstance(node.this, exp.Dot)
                and isinstance(node.this.expression, exp.Func)):
            _check_table_function(node.this.expression, sql)  # LATERAL main.summary(...)
        _check_qualified_rms_call(node, sql)
        if isinstance(node, _FORBIDDEN_NODES):
            raise _reject(f"{_statement_kind(node, sql)} clause", sql)
        if isinstance(node, exp.Select) and node.args.get("into") is not None:
            raise _reject("SELECT ... INTO", sql)
        if isinstance(node, exp.Table):
            _check_table(node, sql, tables, in_scope)
        if isinstance(node, exp.Func):
            name = _func_name(node)
            if _FILE_FUNCTIONS.match(name) or type(node).__name__.startswith("Read"):
                raise _reject(f"the function {name}", sql)


def _check_table(node: exp.Table, sql: str, tables: frozenset[str] | None,
                 in_scope: Callable[[exp.Expr], frozenset[str]]) -> None:
    this = node.this
    if isinstance(this, exp.Func):
        _check_table_function(this, sql)
        return
    if not isinstance(this, exp.Identifier):
        raise _reject(f"a file, stage or URL in FROM ({node.sql()})", sql, _FILE_FIX)
    parts = [part.name for part in node.parts]
    dotted = ".".join(parts)
    if (any(part.lower() in _SYSTEM_SCHEMAS for part in parts[:-1])
            or _SYSTEM_VIEWS.match(parts[-1])):
        raise _reject(f"the system view {dotted} (catalogs, settings and logs expose file "
                      "paths and other queries)", sql)
    # DuckDB joins the parts with dots to find a file: "data".csv reads data.csv.
    if any(_PATH_CHARS.search(part) for part in parts) or _FILE_SUFFIX.search(dotted):
        raise _reject(f"a file or URL in FROM ({node.sql()})", sql, _FILE_FIX)
    if tables is not None and dotted.translate(ASCII_LOWER) not in tables and not (
            len(parts) == 1 and dotted.translate(ASCII_LOWER) in in_scope(node)):
        raise QueryRejectedError(
            f"ranking query rejected: {dotted!r} in {_show(sql)} is not a table, view or CTE "
            "of this database (DuckDB would read an unknown name as a file or a Python "
            "variable); create or register it first (con.register(name, dataframe)), or "
            "pass the DataFrame itself: rms_duck.pack(con, dataframe, budget=...)",
            unknown_name=dotted)


def _check_table_function(func: exp.Func, sql: str) -> None:
    name = _func_name(func)
    if name.lower() not in _TABLE_FUNCTIONS and not name.lower().startswith("rms_"):
        raise _reject(f"the table function {name} (allowed in FROM: "
                      f"{', '.join(sorted(_TABLE_FUNCTIONS))} and rms_* macros)", sql,
                      _FILE_FIX if name.lower().startswith("read_") else "")


def _check_qualified_rms_call(node: exp.Expr, sql: str) -> None:
    """rms_duck's macros are trusted as the shipped TEMP copies a ranking query runs with.
    A name qualified with its database (db.rms_candidates(...), db.main.rms_x(...)) reaches
    the copy stored in the file instead, which a writer may have changed (on a read-only
    file it cannot be restored): it read a file through a planted rms_candidates."""
    if isinstance(node, exp.Table) and isinstance(node.this, exp.Func) and (
            node.args.get("db") or node.args.get("catalog")):
        func: exp.Expr = node.this
    elif isinstance(node, exp.Dot) and isinstance(node.expression, exp.Func):
        func = node.expression
    else:
        return
    name = _func_name(func).lower()  # type: ignore[arg-type]
    if name.startswith("rms_") or name == "pack_context":
        raise _reject(f"the qualified call {node.sql()[:80]} (a qualified name reaches the "
                      "copy stored in the file, not rms_duck's shipped one)", sql,
                      f"; call it unqualified: {name}(...)")


def _func_name(node: exp.Func) -> str:
    name = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
    return name or type(node).__name__


def _statement_kind(node: exp.Expr, sql: str) -> str:
    """What to call a rejected statement: sqlglot's node, or the SQL's own first keyword
    when sqlglot fell back to a Command or mis-parsed a bare word (CHECKPOINT -> Column)."""
    if isinstance(node, exp.Command):
        return str(node.this).upper()
    if isinstance(node, (exp.Column, exp.Alias, exp.Identifier)) or not node.key:
        return _leading_word(sql) or type(node).__name__.upper()
    return type(node).__name__.upper()


def _leading_word(sql: str) -> str:
    match = _LEADING_WORD.match(sql)
    return match.group(1).upper() if match else ""


def _show(sql: str) -> str:
    return repr(sql if len(sql) <= 120 else sql[:117] + "...")


def _reject(what: str, sql: str, fix: str = "") -> QueryRejectedError:
    return QueryRejectedError(
        f"ranking query rejected: {what} is not allowed in {_show(sql)}; "
        "pass one read-only SELECT over your tables (no DDL, DML, files, URLs or settings)"
        + fix)


# An analyst's candidates often sit in a Parquet or CSV file: say how to rank them anyway.
_FILE_FIX = ("; to rank a file's rows, pass them as a table: rms_duck.pack(con, "
             "con.read_parquet(path), budget=...) (or read_csv), or load them into a table "
             "of your own first")

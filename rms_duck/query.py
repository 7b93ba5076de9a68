"""Ranking queries from callers: one read-only SELECT, checked with sqlglot, made canonical.

The guard allow-lists the statement kinds it accepts and rejects everything else, including
what sqlglot parses leniently (CHECKPOINT as a column, SELECT ... INTO as a plain select).
It also rejects table functions and replacement scans that read files or URLs. Execution
then runs inside a READ ONLY transaction as a second wall (see duck/storage.py).
"""

from __future__ import annotations

import hashlib
import logging
import re
from dataclasses import dataclass

import sqlglot
from sqlglot import exp
from sqlglot.errors import ParseError, SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

from .errors import QueryRejectedError

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
_FILE_FUNCTIONS = re.compile(
    r"^(read_\w+|glob|sniff_csv|parquet_\w+|iceberg_\w+|delta_scan|json_scan\w*|"
    r"duckdb_secrets|which_secret|getvariable|setvariable|nextval|currval|"
    r"query|query_table|postgres_\w+|sqlite_\w+|mysql_\w+|httpfs\w*|load_\w+|"
    r"install_\w+|pragma_\w+|checkpoint|force_checkpoint|export_\w+|import_\w+|"
    r"rms_pack_udf|pack_context)$",
    re.IGNORECASE,
)
_PATHLIKE = re.compile(r"[/\\:*?]|\.(csv|tsv|parquet|json|jsonl|ndjson|txt|gz|zst|db|duckdb)$",
                       re.IGNORECASE)
_BARE_WORDS = {"checkpoint", "force", "vacuum", "analyze"}


@dataclass(frozen=True, slots=True)
class CheckedQuery:
    """A guarded query: DuckDB SQL to run, plus its canonical form and fingerprint."""

    sql: str
    canonical: str
    fingerprint: str
    dialect: str
    sqlglot_version: str

    def to_dict(self) -> dict[str, str]:
        return {"sql": self.canonical, "fingerprint": self.fingerprint, "dialect": self.dialect,
                "sqlglot_version": self.sqlglot_version}


def check_query(sql: str, dialect: str = "duckdb") -> CheckedQuery:
    """Accept exactly one read-only SELECT; return it transpiled to DuckDB.

    Raises:
        QueryRejectedError: anything else, with the reason and the fix.
    """
    if not isinstance(sql, str) or not sql.strip():
        raise QueryRejectedError(f"ranking query must be one SELECT statement, got {sql!r}")
    quiet = logging.getLogger("sqlglot")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # its "falling back to Command" warnings are ours to report
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except (ParseError, SqlglotError) as exc:
        raise QueryRejectedError(
            f"ranking query could not be parsed as {dialect} SQL: {str(exc).splitlines()[0]}; "
            "pass one SELECT (or name its dialect with dialect=...)"
        ) from None
    except ValueError as exc:
        raise QueryRejectedError(f"unknown SQL dialect {dialect!r}: {exc}") from None
    finally:
        quiet.setLevel(level)
    if len(statements) != 1:
        raise QueryRejectedError(
            f"ranking query must be exactly one statement, got {len(statements)}; "
            "remove the extra statements"
        )
    tree = statements[0]
    _check_tree(tree, sql)
    duck_sql = tree.sql(dialect="duckdb")
    canonical = normalize_identifiers(tree.copy(), dialect="duckdb").sql(
        dialect="duckdb", comments=False, normalize=True)
    return CheckedQuery(duck_sql, canonical, fingerprint(tree), dialect, sqlglot.__version__)


def fingerprint(tree: exp.Expression) -> str:
    """sha256 of the canonical SQL with every literal replaced by '?': the query's shape."""
    shape = normalize_identifiers(tree.copy(), dialect="duckdb")
    shape = shape.transform(lambda node: exp.Placeholder() if isinstance(node, exp.Literal)
                            else node)
    text = shape.sql(dialect="duckdb", comments=False, normalize=True)
    return hashlib.sha256(text.encode()).hexdigest()


def _check_tree(tree: exp.Expression, sql: str) -> None:
    if not isinstance(tree, _ROOTS):
        kind = type(tree).__name__.upper()
        if isinstance(tree, exp.Column) and tree.name.lower() in _BARE_WORDS:
            kind = tree.name.upper()
        raise _reject(f"{kind} statement", sql)
    for node in tree.walk():
        if isinstance(node, _FORBIDDEN_NODES):
            raise _reject(f"{type(node).__name__.upper()} clause", sql)
        if isinstance(node, exp.Select) and node.args.get("into") is not None:
            raise _reject("SELECT ... INTO", sql)
        if isinstance(node, exp.Table):
            _check_table(node, sql)
        if isinstance(node, exp.Func):
            name = node.name if isinstance(node, exp.Anonymous) else node.sql_name()
            if _FILE_FUNCTIONS.match(name or "") or type(node).__name__.startswith("Read"):
                raise _reject(f"the function {name or type(node).__name__}", sql)


def _check_table(node: exp.Table, sql: str) -> None:
    this = node.this
    if isinstance(this, exp.Literal) or (isinstance(this, exp.Identifier) and this.quoted
                                         and _PATHLIKE.search(this.name)):
        raise _reject(f"a file or URL in FROM ({node.sql()})", sql)
    if isinstance(this, exp.Func):
        name = this.name if isinstance(this, exp.Anonymous) else this.sql_name()
        if _FILE_FUNCTIONS.match(name or ""):
            raise _reject(f"the table function {name}", sql)


def _reject(what: str, sql: str) -> QueryRejectedError:
    shown = sql if len(sql) <= 120 else sql[:117] + "..."
    return QueryRejectedError(
        f"ranking query rejected: {what} is not allowed in {shown!r}; "
        "pass one read-only SELECT over your tables (no DDL, DML, files, URLs or settings)"
    )

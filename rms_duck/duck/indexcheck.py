"""Keep the lexical index current before a ranking query reads it.

rms_candidates() refuses an out-of-date index (sql/ranking.sql, rms_index_guard); a query
that ranks through it from Python gets the index refreshed first, when the connection can
write. On a read-only connection the guard's error says what to run.
"""

from __future__ import annotations

import re

import duckdb

from .ranking import refresh_index

_LEXICAL_MACROS = re.compile(
    r"\b(rms_candidates|rms_candidate_scores|rms_bm25|rms_ngram_similarity)\"?\s*\(",
    re.IGNORECASE)


def reads_lexical_index(sql: str) -> bool:
    """Whether a ranking query calls a macro that reads the lexical index."""
    return bool(_LEXICAL_MACROS.search(sql))


def index_went_stale(exc: BaseException) -> bool:
    """Whether a ranking query failed on rms_candidates' guard against an out-of-date index
    (another thread or connection added or edited a node after the refresh)."""
    return "the lexical index is out of date" in str(exc)


def ensure_index(con: duckdb.DuckDBPyConnection) -> bool | None:
    """Refresh the lexical index when nodes are missing from it or changed since; return
    True when it refreshed, False when it was current, None on a read-only connection,
    which is left alone."""
    rows = con.execute(
        "SELECT readonly FROM system.main.duckdb_databases() "
        "WHERE database_name = system.main.current_database()"
    ).fetchall()
    if rows and rows[0][0]:
        return None
    missing, stale = con.execute(
        "SELECT missing, stale FROM rms_lexical_index_status()").fetchall()[0]
    if not (missing or stale):
        return False
    refresh_index(con)
    return True

"""The organiser pass for RFC Method 3: keep rms_nodes.token_cost_estimate current.

Databases created by this schema compute the column at insert time (a generated column,
always current), so there is nothing to refresh. A database created before that holds a
plain column, which this pass fills and refreshes with Method 2.
"""

from __future__ import annotations

import duckdb

from .cursors import check_connection, cursor, explains_setup


def estimate_is_generated(con: duckdb.DuckDBPyConnection) -> bool:
    """True when rms_nodes.token_cost_estimate is computed by the database itself."""
    rows = con.execute(
        "SELECT column_default FROM duckdb_columns() WHERE table_name = 'rms_nodes' "
        "AND column_name = 'token_cost_estimate' AND schema_name = current_schema()"
    ).fetchall()
    return bool(rows) and rows[0][0] is not None and "regexp_replace" in rows[0][0]


@explains_setup("rms_duck.refresh_token_estimates")
def refresh_token_estimates(con: duckdb.DuckDBPyConnection) -> int:
    """Fill missing and refresh stale Method 2 estimates; return how many rows changed.

    Calls the UDF directly: TEMP macros are not visible on cursors.
    """
    check_connection(con, "rms_duck.refresh_token_estimates")
    if estimate_is_generated(con):
        return 0  # computed from the content on every read: never missing, never stale
    cur = cursor(con)
    try:
        cur.execute("BEGIN TRANSACTION")
        changed = cur.execute(
            "UPDATE rms_nodes SET token_cost_estimate = rms_token_estimate_udf(content, NULL) "
            "WHERE token_cost_estimate IS DISTINCT FROM rms_token_estimate_udf(content, NULL)"
        ).fetchall()[0][0]
        cur.execute("COMMIT")
        return int(changed)
    except BaseException:
        cur.execute("ROLLBACK")
        raise
    finally:
        cur.close()

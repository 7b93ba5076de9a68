"""The organiser pass for RFC Method 3: keep rms_nodes.token_cost_estimate current."""

from __future__ import annotations

import duckdb

from .cursors import cursor


def refresh_token_estimates(con: duckdb.DuckDBPyConnection) -> int:
    """Fill missing and refresh stale Method 2 estimates; return how many rows changed.

    Calls the UDF directly: TEMP macros are not visible on cursors.
    """
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

"""explain(): why each candidate of a stored receipt was packed or dropped.

Runs the rms_receipt_decisions query shipped in the package (not the view stored in the
database, which a writer could replace): the same rows as SQL's
`SELECT * FROM rms_receipt_candidates(<receipt id>)` on an untampered database.
"""

from __future__ import annotations

from typing import Any

import duckdb

from ..duck.cursors import audit_cursor, check_connection, explains_setup
from ..duck.shipped import drop_statement, shadowing_objects, with_views
from ..errors import ReceiptError
from .ids import resolve_receipt_id


@explains_setup("rms_duck.audit.explain.explain")
def explain(con: duckdb.DuckDBPyConnection, receipt_id: object) -> list[dict[str, Any]]:
    """One dict per candidate: score, tier, order_key, tried, chosen, tokens, decision, reason.

    Args:
        con: a connection from rms_duck.connect().
        receipt_id: a receipt id or bundle id.

    Returns:
        Packed candidates first in context order, then the excluded ones by tier and key.

    Raises:
        ReceiptError: the id is not a UUID or names no stored receipt.
    """
    check_connection(con, "rms_duck.audit.explain.explain")
    cur = audit_cursor(con)
    try:
        rid = resolve_receipt_id(cur, receipt_id)
        _refuse_shadowed_builtins(cur)
        rows = cur.sql(with_views(
            "SELECT * FROM rms_receipt_decisions WHERE receipt_id = ? "
            "ORDER BY position NULLS LAST, tier NULLS LAST, order_key DESC NULLS LAST, node_id",
            "rms_receipt_decisions"), params=[rid]).to_arrow_table().to_pylist()
        if not rows:
            _check_readable(cur, rid)  # no rows: an empty pack, or a receipt that won't parse
        return rows
    finally:
        cur.close()


def _refuse_shadowed_builtins(cur: duckdb.DuckDBPyConnection) -> None:
    """The shipped query calls built-in JSON functions and names the JSON type, which a
    macro or type stored in the file under the same name would replace, and so change the
    decisions it shows."""
    shadows = shadowing_objects(cur)
    if shadows:
        names = ", ".join(f"{kind.replace('_', ' ')} {name}" for name, kind in shadows)
        drops = "; ".join(drop_statement(name, kind) for name, kind in shadows)
        raise ReceiptError(
            f"cannot explain: the stored {names} has the name of a built-in, which DuckDB "
            f"would use in its place; on a copy of the file run {drops}, and run "
            "rms_duck.verify_receipts(con) to see what else was changed")


def _check_readable(cur: duckdb.DuckDBPyConnection, rid: str) -> None:
    (valid, kind), = cur.execute(
        "SELECT json_valid(receipt), CASE WHEN json_valid(receipt) "
        "THEN json_type(receipt, '$.candidates') END FROM rms_receipts WHERE receipt_id = ?",
        [rid]).fetchall()
    if not valid or kind != "ARRAY":
        what = "is not valid JSON" if not valid else "has no 'candidates' list"
        raise ReceiptError(f"receipt {rid!r} {what}, so it cannot be explained; it was edited "
                           "after it was written: run rms_duck.verify_receipts(con) and "
                           "restore it from a backup")

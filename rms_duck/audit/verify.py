"""verify_receipts(): every digest, chain, bundle-binding and stored-object problem.

The receipt checks are the query of the rms_receipt_problems view, read from the package's
schema.sql and run inline against the raw tables: the view stored in the database is never
used, since a writer could have replaced it. Stored rms_* objects that differ from the
shipped ones, and stored macros shadowing built-in functions, are problems of their own.
A chain proves that nothing inside it changed; that nothing was cut off or rewritten at its
end needs the heads saved earlier (rms_duck.export_heads, `rms-duck audit --export-heads`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import duckdb

from ..duck.cursors import audit_cursor, check_connection
from ..duck.shipped import object_problems, view_query
from ..errors import ReceiptError

# Every code the rms_receipt_problems view emits, in the view's order; tests/test_audit.py
# holds this dict, the view and docs/audits.md to the same codes.
PROBLEMS = {
    "MALFORMED_RECEIPT": "the receipt text is not JSON",
    "DIGEST_MISMATCH": "sha256 of the receipt text differs from receipt_sha256",
    "FIELD_MISMATCH": "a column differs from the value in the digested receipt",
    "CHAIN_GAP": "seq does not follow the previous receipt's seq (deleted or reordered)",
    "CHAIN_BROKEN": "prev_sha256 is not the sha256 of the previous receipt in the chain",
    "BUNDLE_MISSING": "the receipt's bundle row is gone",
    "CONTEXT_MISMATCH": "the bundle's context does not hash to the receipt's context_sha256",
    "BUNDLE_FIELD_MISMATCH": "a bundle column (counts, session, namespace, query text, time, "
                             "budget, format, flags or a metric) differs from the receipt",
    "INPUTS_MISMATCH": "the bundle's inputs do not hash to the receipt's inputs_sha256",
    "RECEIPT_MISSING": "a bundle has no receipt",
}
# The codes verify_receipts() adds from Python: stored objects, and saved chain heads.
CHECK_PROBLEMS = {
    "STORED_OBJECT_MISSING": "a shipped rms_* table, view, macro or type is not in the database",
    "STORED_OBJECT_CHANGED": "a stored rms_* object differs from the shipped definition",
    "STORED_OBJECT_UNKNOWN": "an rms_* view or macro that rms_duck does not ship",
    "STORED_OBJECT_SHADOWS": "a stored macro or type has the name of a built-in function "
                             "or type",
    "HEAD_MISSING": "a saved chain head is no longer in the database (receipts cut off)",
    "HEAD_MISMATCH": "the receipt at a saved head's seq has another digest (rewritten)",
}
# Without these tables the receipt checks cannot run at all.
_NEEDED = ("rms_receipts", "rms_bundles")


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiptProblem:
    """One failed check: a code from PROBLEMS or CHECK_PROBLEMS, where it is, and what to do."""

    problem: str
    chain_namespace: str | None
    seq: int | None
    receipt_id: str | None
    bundle_id: str | None
    detail: str
    object_name: str | None = None

    def __str__(self) -> str:
        if self.object_name is not None:
            where = f"object {self.object_name}"
        elif self.seq is not None:
            where = f"chain {self.chain_namespace!r} seq {self.seq}"
        else:
            where = f"bundle {self.bundle_id}"
        return f"{self.problem} at {where}: {self.detail}"


def verify_receipts(con: duckdb.DuckDBPyConnection, *,
                    heads: Mapping[str, Any] | None = None) -> list[ReceiptProblem]:
    """Check every stored receipt and bundle, and the stored SQL objects, with shipped SQL.

    Args:
        con: any DuckDB connection to the database (read-only is enough; nothing is written).
        heads: chain heads saved earlier (rms_duck.export_heads or read_heads(path)): each
            must still be in its chain with the same digest.

    Returns:
        The problems found: stored objects first, then by chain and seq; [] when all is well.

    Raises:
        ReceiptError: the receipt checks failed to run (a damaged table).
    """
    check_connection(con, "rms_duck.verify_receipts")
    cur = audit_cursor(con)
    try:
        problems = [ReceiptProblem(problem=p.problem, chain_namespace=None, seq=None,
                                   receipt_id=None, bundle_id=None, detail=p.detail,
                                   object_name=p.name)
                    for p in object_problems(cur)]
        if any(p.problem == "STORED_OBJECT_MISSING" and p.object_name in _NEEDED
               for p in problems):
            return problems
        try:
            rows = cur.execute(
                "SELECT problem, chain_namespace, seq, CAST(receipt_id AS VARCHAR), "
                f"CAST(bundle_id AS VARCHAR), detail FROM (\n{view_query('rms_receipt_problems')}"
                "\n) AS p ORDER BY chain_namespace, seq NULLS LAST, problem, receipt_id, bundle_id"
            ).fetchall()
        except duckdb.Error as exc:
            raise ReceiptError(
                f"cannot verify: {str(exc).splitlines()[0]}; the rms tables were altered "
                f"({'; '.join(str(p) for p in problems) or 'no object problem found'}): "
                "restore the database from a backup") from None
        problems += [ReceiptProblem(problem=p, chain_namespace=ns, seq=seq, receipt_id=rid,
                                    bundle_id=bid, detail=detail)
                     for p, ns, seq, rid, bid, detail in rows]
        if heads is not None:
            from .heads import check_heads

            problems += check_heads(cur, heads)
    finally:
        cur.close()
    return problems

"""verify_receipts(): every digest, chain and bundle-binding problem in a database.

The checks are one plain SQL view, rms_receipt_problems (sql/schema.sql), so the Python
API, the rms_verify_receipts() table macro and any DuckDB client agree by construction.
A receipt chain can prove that nothing inside it changed; it cannot prove that nothing
was cut off its end together with the matching bundles (keep the latest receipt_sha256
somewhere else if that matters).
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from ..duck.cursors import cursor
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
    "BUNDLE_FIELD_MISMATCH": "a bundle column (tokens_used, budget, available, context_format, "
                             "flags or a metric) differs from the digested receipt",
    "INPUTS_MISMATCH": "the bundle's inputs do not hash to the receipt's inputs_sha256",
    "RECEIPT_MISSING": "a bundle has no receipt",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ReceiptProblem:
    """One failed check: a code from PROBLEMS, where it is, and what to do."""

    problem: str
    chain_namespace: str | None
    seq: int | None
    receipt_id: str | None
    bundle_id: str | None
    detail: str

    def __str__(self) -> str:
        where = (f"chain {self.chain_namespace!r} seq {self.seq}" if self.seq is not None
                 else f"bundle {self.bundle_id}")
        return f"{self.problem} at {where}: {self.detail}"


def verify_receipts(con: duckdb.DuckDBPyConnection) -> list[ReceiptProblem]:
    """Check every stored receipt and bundle.

    Args:
        con: a connection from rms_duck.connect() (or prepared by rms_duck.register()).

    Returns:
        The problems found, ordered by chain and seq; an empty list when all is well.

    Raises:
        ReceiptError: the database lacks the rms audit views.
    """
    cur = cursor(con)
    try:
        rows = cur.execute(
            "SELECT problem, chain_namespace, seq, CAST(receipt_id AS VARCHAR), "
            "CAST(bundle_id AS VARCHAR), detail FROM rms_receipt_problems "
            "ORDER BY chain_namespace, seq NULLS LAST, problem, receipt_id, bundle_id"
        ).fetchall()
    except duckdb.CatalogException as exc:
        raise ReceiptError(
            f"cannot verify: {str(exc).splitlines()[0]}; install the schema with "
            "rms_duck.register(con) on a writable connection (or open the file with "
            "rms_duck.connect(path)) first") from None
    finally:
        cur.close()
    return [ReceiptProblem(problem=p, chain_namespace=ns, seq=seq, receipt_id=rid,
                           bundle_id=bid, detail=detail)
            for p, ns, seq, rid, bid, detail in rows]

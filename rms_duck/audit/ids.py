"""Turn what a caller passes as a receipt reference into a stored receipt_id."""

from __future__ import annotations

import uuid

import duckdb

from ..errors import ReceiptError


def resolve_receipt_id(cur: duckdb.DuckDBPyConnection, value: object) -> str:
    """The receipt_id of a receipt id or bundle id (UUID or text).

    Raises:
        ReceiptError: the value is not a UUID, or no stored receipt has it.
    """
    try:
        wanted = value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError:
        raise ReceiptError(
            f"receipt_id must be a UUID, got {value!r}; pass a receipt_id or bundle_id from "
            "rms_receipts (MemoryBundle.receipt_id after rms_duck.pack)") from None
    # A receipt id first: a receipt whose bundle_id has another receipt's id (an edit; ids
    # are random) must not stand in for that receipt.
    rows = cur.execute(
        "SELECT CAST(receipt_id AS VARCHAR) FROM rms_receipts WHERE ? IN (receipt_id, bundle_id) "
        "ORDER BY receipt_id = ? DESC LIMIT 1", [wanted, wanted]).fetchall()
    if not rows:
        raise ReceiptError(
            f"unknown receipt {str(wanted)!r}: no receipt_id or bundle_id in rms_receipts has "
            "it; list them with SELECT receipt_id, bundle_id FROM rms_receipts")
    return rows[0][0]

"""Audits of stored bundles and receipts: verify, replay, explain, summarise.

Modules, one concept each: verify (digests, hash chain, bundle binding), replay (same
inputs, same bytes?), explain (one row per candidate of a receipt), ids (receipt or bundle
id -> receipt_id), summary (what `rms-duck audit` prints). Re-packing itself is pure and
lives in packing/repack.py. The SQL behind them lives in sql/schema.sql and sql/macros.sql.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """Submodules load on first use (rms_duck._submodule)."""
    import rms_duck

    return rms_duck._submodule(__name__, name)

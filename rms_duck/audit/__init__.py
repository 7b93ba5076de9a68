"""Audits of stored bundles and receipts: verify, replay, explain, summarise.

Modules, one concept each: repack (pure re-packing of recorded inputs; no DuckDB),
verify (digests, hash chain, bundle binding), replay (same inputs, same bytes?),
explain (one row per candidate of a receipt), ids (receipt or bundle id -> receipt_id),
summary and cli (`rms-duck audit`).
The SQL behind them lives in sql/schema.sql (plain views) and sql/macros.sql.
This package imports nothing on its own, so the UDF module can import repack.
"""

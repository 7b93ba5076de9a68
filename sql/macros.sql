-- rms_duck audit macros: pure SQL (no UDFs), so they persist in the database beside the
-- schema and any DuckDB client can call them (rms_duck.register(con) keeps them current).
-- They are a convenience: rms_duck's own verify and replay run the SQL shipped in the
-- package, never these stored copies, which anyone with write access could change.

-- rms_resolve_context_ref: the node id behind a citation such as 'm3' in a bundle
CREATE OR REPLACE MACRO rms_resolve_context_ref(bundle, ref) AS COALESCE(
    list_extract(list_filter(bundle.context_references, lambda r: r.ref = ref), 1).id,
    error('unknown context reference ' || to_json(ref) || '; use a ref listed in the bundle''s context_references'));
COMMENT ON MACRO rms_resolve_context_ref IS 'rms_resolve_context_ref(bundle, ref): node id for a [m#] citation, or an error';

-- rms_bundle_included: one row per packed record of a bundle
CREATE OR REPLACE MACRO rms_bundle_included(bundle) AS TABLE
    SELECT unnest(struct_extract(bundle, 'included'), recursive := true);
COMMENT ON MACRO TABLE rms_bundle_included IS 'rms_bundle_included(bundle): packed records as rows';

-- rms_bundle_excluded: one row per excluded candidate of a bundle, with its reason
CREATE OR REPLACE MACRO rms_bundle_excluded(bundle) AS TABLE
    SELECT unnest(struct_extract(bundle, 'excluded'), recursive := true);
COMMENT ON MACRO TABLE rms_bundle_excluded IS 'rms_bundle_excluded(bundle): excluded candidates and reasons as rows';

-- rms_receipt_id: the receipt_id for a receipt id or a bundle id, or an error naming the value
-- (a receipt id first: a receipt whose bundle_id has another receipt's id must not stand in)
CREATE OR REPLACE MACRO rms_receipt_id(rid) AS CASE WHEN rid IS NOT NULL THEN coalesce(
    (SELECT any_value(r.receipt_id) FROM rms_receipts AS r
      WHERE r.receipt_id = TRY_CAST(rid AS UUID)),
    (SELECT any_value(r.receipt_id) FROM rms_receipts AS r
      WHERE r.bundle_id = TRY_CAST(rid AS UUID)),
    error('unknown receipt ' || to_json(CAST(rid AS VARCHAR))
          || '; pass a receipt_id or bundle_id from rms_receipts')) END;
COMMENT ON MACRO rms_receipt_id IS 'rms_receipt_id(id): receipt_id of a receipt or bundle id; an error when there is none';

-- rms_receipt_candidates: explain one receipt: a row per candidate, packed ones in context order
CREATE OR REPLACE MACRO rms_receipt_candidates(rid) AS TABLE
    SELECT d.* FROM rms_receipt_decisions AS d
    WHERE d.receipt_id = rms_receipt_id(rid)
    ORDER BY d.position NULLS LAST, d.tier NULLS LAST, d.order_key DESC NULLS LAST, d.node_id;
COMMENT ON MACRO TABLE rms_receipt_candidates IS 'rms_receipt_candidates(receipt_or_bundle_id): score, tier, order_key, tried, chosen, tokens, decision, reason per candidate';

-- rms_verify_receipts: every digest, chain and bundle-binding problem; no rows when all is well
CREATE OR REPLACE MACRO rms_verify_receipts() AS TABLE
    SELECT * FROM rms_receipt_problems
    ORDER BY chain_namespace, seq NULLS LAST, problem, receipt_id, bundle_id;
COMMENT ON MACRO TABLE rms_verify_receipts IS 'rms_verify_receipts(): chain_namespace, seq, receipt_id, bundle_id, problem, detail (empty when verified)';

-- rms_duck macros. TEMP, because the Python UDFs they call live only as long as the
-- connection that registered them. Run after the UDFs are registered; safe to run again.

-- pack_context: pack a LIST of candidate STRUCTs into a token budget; returns the bundle
CREATE OR REPLACE TEMP MACRO pack_context(candidates, budget) AS
    rms_pack_udf(CAST(candidates AS rms_candidate[]), budget, NULL),
    (candidates, budget, config) AS
    rms_pack_udf(CAST(candidates AS rms_candidate[]), budget, CAST(to_json(config) AS VARCHAR));
COMMENT ON MACRO pack_context IS 'pack_context(candidates, budget [, config]): RFC-0006 bundle STRUCT, counted exactly';

-- rms_token_count: exact count (RFC Method 1), o200k_base unless an encoding is named
CREATE OR REPLACE TEMP MACRO rms_token_count(text) AS rms_token_count_udf(text, 'o200k_base'),
    (text, encoding) AS rms_token_count_udf(text, encoding);
COMMENT ON MACRO rms_token_count IS 'rms_token_count(text [, encoding]): exact token count, special tokens counted as text';

-- rms_token_estimate: ceil(chars / chars_per_token) (RFC Method 2); the second argument is
-- a number of characters per token, or an encoding name whose per-script ratios to use
CREATE OR REPLACE TEMP MACRO rms_token_estimate(text) AS rms_token_estimate_udf(text, NULL),
    (text, ratio_or_encoding) AS rms_token_estimate_udf(text, CAST(ratio_or_encoding AS VARCHAR));
COMMENT ON MACRO rms_token_estimate IS 'rms_token_estimate(text [, chars_per_token or encoding]): Method 2 estimate, per-script ratios (of o200k_base unless an encoding is named)';

-- rms_resolve_context_ref: the node id behind a citation such as 'm3' in a bundle
CREATE OR REPLACE TEMP MACRO rms_resolve_context_ref(bundle, ref) AS COALESCE(
    list_extract(list_filter(bundle.context_references, lambda r: r.ref = ref), 1).id,
    error('unknown context reference ' || to_json(ref) || '; use a ref listed in the bundle''s context_references'));
COMMENT ON MACRO rms_resolve_context_ref IS 'rms_resolve_context_ref(bundle, ref): node id for a [m#] citation, or an error';

-- rms_bundle_included: one row per packed record of a bundle
CREATE OR REPLACE TEMP MACRO rms_bundle_included(bundle) AS TABLE
    SELECT unnest(struct_extract(bundle, 'included'), recursive := true);
COMMENT ON MACRO TABLE rms_bundle_included IS 'rms_bundle_included(bundle): packed records as rows';

-- rms_bundle_excluded: one row per excluded candidate of a bundle, with its reason
CREATE OR REPLACE TEMP MACRO rms_bundle_excluded(bundle) AS TABLE
    SELECT unnest(struct_extract(bundle, 'excluded'), recursive := true);
COMMENT ON MACRO TABLE rms_bundle_excluded IS 'rms_bundle_excluded(bundle): excluded candidates and reasons as rows';

-- rms_receipt_id: the receipt_id for a receipt id or a bundle id, or an error naming the value
CREATE OR REPLACE TEMP MACRO rms_receipt_id(rid) AS CASE WHEN rid IS NOT NULL THEN coalesce(
    (SELECT any_value(r.receipt_id) FROM rms_receipts AS r
      WHERE TRY_CAST(rid AS UUID) IN (r.receipt_id, r.bundle_id)),
    error('unknown receipt ' || to_json(CAST(rid AS VARCHAR))
          || '; pass a receipt_id or bundle_id from rms_receipts')) END;
COMMENT ON MACRO rms_receipt_id IS 'rms_receipt_id(id): receipt_id of a receipt or bundle id; an error when there is none';

-- rms_receipt_candidates: explain one receipt: a row per candidate, packed ones in context order
CREATE OR REPLACE TEMP MACRO rms_receipt_candidates(rid) AS TABLE
    SELECT d.* FROM rms_receipt_decisions AS d
    WHERE d.receipt_id = rms_receipt_id(rid)
    ORDER BY d.position NULLS LAST, d.tier NULLS LAST, d.order_key DESC NULLS LAST, d.node_id;
COMMENT ON MACRO TABLE rms_receipt_candidates IS 'rms_receipt_candidates(receipt_or_bundle_id): score, tier, order_key, tried, chosen, tokens, decision, reason per candidate';

-- rms_verify_receipts: every digest, chain and bundle-binding problem; no rows when all is well
CREATE OR REPLACE TEMP MACRO rms_verify_receipts() AS TABLE
    SELECT * FROM rms_receipt_problems
    ORDER BY chain_namespace, seq NULLS LAST, problem, receipt_id, bundle_id;
COMMENT ON MACRO TABLE rms_verify_receipts IS 'rms_verify_receipts(): chain_namespace, seq, receipt_id, bundle_id, problem, detail (empty when verified)';

-- rms_replay: re-pack each receipt's stored inputs and compare the bytes (context_sha256);
-- changed_nodes lists candidates whose rms_nodes.content no longer hashes as recorded
CREATE OR REPLACE TEMP MACRO rms_replay(rid := NULL) AS TABLE
    WITH picked AS (
        SELECT r.receipt_id, r.bundle_id, r.chain_namespace, r.seq,
               CASE WHEN json_valid(r.receipt) THEN r.receipt END AS j,
               CAST(b.inputs AS VARCHAR) AS inputs
        FROM rms_receipts AS r LEFT JOIN rms_bundles AS b ON b.bundle_id = r.bundle_id
        WHERE rid IS NULL OR r.receipt_id = rms_receipt_id(rid)
    ),
    replayed AS (
        SELECT p.*, coalesce(json_extract_string(p.j, '$.context_sha256'), '?') AS recorded_sha256,
               rms_replay_udf(p.inputs, TRY_CAST(json_extract(p.j, '$.budget') AS BIGINT),
                              CAST(json_extract(p.j, '$.config') AS VARCHAR)) AS out
        FROM picked AS p
    ),
    changed AS (
        SELECT d.receipt_id, list(d.node_id ORDER BY d.node_id) AS changed_nodes
        FROM rms_receipt_decisions AS d JOIN rms_nodes AS n ON CAST(n.id AS VARCHAR) = d.node_id
        WHERE d.receipt_id IN (SELECT receipt_id FROM picked)
          AND sha256(n.content) IS DISTINCT FROM d.content_sha256
        GROUP BY d.receipt_id
    )
    SELECT x.receipt_id, x.bundle_id, x.chain_namespace, x.seq, x.recorded_sha256,
           struct_extract(x.out, 'context_sha256') AS replayed_sha256,
           coalesce(struct_extract(x.out, 'context_sha256') = x.recorded_sha256, false)
               AS identical,
           coalesce(sha256(x.inputs) = json_extract_string(x.j, '$.inputs_sha256'), false)
               AS inputs_intact,
           coalesce(c.changed_nodes, []) AS changed_nodes,
           struct_extract(x.out, 'error') AS error
    FROM replayed AS x LEFT JOIN changed AS c ON c.receipt_id = x.receipt_id
    ORDER BY x.chain_namespace, x.seq;
COMMENT ON MACRO TABLE rms_replay IS 'rms_replay(rid := NULL): per receipt (all when NULL): recorded vs replayed context_sha256, identical, inputs_intact, changed_nodes, error';

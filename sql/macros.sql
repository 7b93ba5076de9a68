-- rms_duck macros. TEMP, because the Python UDFs they call live only as long as the
-- connection that registered them. Run after the UDFs are registered; safe to run again.

-- pack_context: pack a LIST of candidate STRUCTs into a token budget; returns the bundle
CREATE OR REPLACE TEMP MACRO pack_context(candidates, budget) AS
    rms_pack_udf(CAST(candidates AS rms_candidate[]), budget, NULL),
    (candidates, budget, config) AS
    rms_pack_udf(CAST(candidates AS rms_candidate[]), budget, CAST(to_json(config) AS VARCHAR));
COMMENT ON MACRO pack_context IS 'pack_context(candidates, budget [, config]): RFC-0006 bundle STRUCT, counted exactly';

-- rms_token_count: exact tiktoken count (RFC Method 1)
CREATE OR REPLACE TEMP MACRO rms_token_count(text) AS rms_token_count_udf(text, 'cl100k_base'),
    (text, encoding) AS rms_token_count_udf(text, encoding);
COMMENT ON MACRO rms_token_count IS 'rms_token_count(text [, encoding]): exact token count, special tokens counted as text';

-- rms_token_estimate: ceil(chars / chars_per_token) (RFC Method 2)
CREATE OR REPLACE TEMP MACRO rms_token_estimate(text) AS rms_token_estimate_udf(text, NULL),
    (text, chars_per_token) AS rms_token_estimate_udf(text, chars_per_token);
COMMENT ON MACRO rms_token_estimate IS 'rms_token_estimate(text [, chars_per_token]): Method 2 estimate, per-script ratios when omitted';

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

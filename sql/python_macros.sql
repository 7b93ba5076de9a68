-- rms_duck's Python-backed macros: TEMP, because the Arrow UDFs they call live only as long
-- as the connection that registered them. rms_duck.register(con) runs this after creating
-- the UDFs; the TEMP macros shadow the persistent stubs of the same names
-- (sql/python_stubs.sql), which tell a plain DuckDB client to call rms_duck.register(con).

-- rms_budget_arg: a budget of any SQL type as BIGINT, or an error naming it: a whole number
-- in a DOUBLE, DECIMAL or text is taken, 400.5 or '400.5' is refused rather than rounded
CREATE OR REPLACE TEMP MACRO rms_budget_arg(budget, fn) AS
    -- NULL goes on to the UDF, whose error names the group it belongs to.
    CASE WHEN budget IS NULL THEN CAST(NULL AS BIGINT)
         WHEN typeof(budget) = 'BOOLEAN' OR TRY_CAST(budget AS DOUBLE) IS NULL
              OR NOT isfinite(TRY_CAST(budget AS DOUBLE))
              OR TRY_CAST(budget AS DOUBLE) <> floor(TRY_CAST(budget AS DOUBLE))
         THEN error(fn || ': budget must be a whole number of tokens, got '
                    || CAST(budget AS VARCHAR) || '; pass for example 4096')
         WHEN NOT TRY_CAST(budget AS DOUBLE) BETWEEN -2147483648 AND 2147483647
         THEN error(fn || ': budget must be in -2,147,483,648..2,147,483,647 tokens (it is '
                    || 'stored as a 32-bit INTEGER), got ' || CAST(budget AS VARCHAR)
                    || '; pass a budget such as 4096 (0 or less gives BUDGET_ERROR)')
         ELSE CAST(TRY_CAST(budget AS DOUBLE) AS BIGINT) END;
COMMENT ON MACRO rms_budget_arg IS 'rms_budget_arg(budget, fn): the budget as BIGINT; an error naming fn when it is not a whole number';

-- rms_candidates_arg: the candidates as rms_candidate[] (a LIST or ARRAY of STRUCTs, an
-- empty list or NULL), or an error naming fn: DuckDB's own cast error prints the whole
-- canonical type and not what to pass (JSON too: its cast to a STRUCT wants every one of the
-- 26 fields). rms_candidate_type_udf reads the type typeof() prints (one text per query, so
-- the optimizer runs it once, while planning): it raises for what is not a list of STRUCTs
-- and for a field whose values the cast would change or refuse, and is false when a whole
-- field is FLOAT or DOUBLE. Then rms_whole_values_udf raises the Python checks' error for
-- NaN, infinity or 1e19, which DuckDB's cast refuses naming no field; its type is put in by
-- duck/macros.py: rms_candidate with DOUBLE whole fields. Otherwise the plan keeps only the
-- cast: each copy of `candidates` in a macro is bound again, and the four branches this
-- took before cost about 1 ms of planning a call (docs/performance.md, round 28).
CREATE OR REPLACE TEMP MACRO rms_candidates_arg(candidates, fn) AS
    CAST(CASE WHEN rms_candidate_type_udf(typeof(candidates), fn) THEN candidates
              WHEN rms_whole_values_udf(CAST(candidates AS rms_candidate_wholes_as_double[]))
              THEN candidates END AS rms_candidate[]);
COMMENT ON MACRO rms_candidates_arg IS 'rms_candidates_arg(candidates, fn): the candidates as rms_candidate[]; an error naming fn when they are not a LIST of STRUCTs';

-- pack_context: pack a LIST of candidate STRUCTs into a token budget; returns the bundle
CREATE OR REPLACE TEMP MACRO pack_context(candidates, budget) AS
    rms_pack_udf(rms_candidates_arg(candidates, 'pack_context'),
                 rms_budget_arg(budget, 'pack_context'),
                 NULL),
    (candidates, budget, config) AS
    rms_pack_udf(rms_candidates_arg(candidates, 'pack_context'),
                 rms_budget_arg(budget, 'pack_context'),
                 CAST(to_json(config) AS VARCHAR));
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

-- rms_replay: re-pack each receipt's stored inputs and compare the bytes (context_sha256,
-- and the stored context's), the decisions, the tokenizer and every other receipt field;
-- changed_nodes lists candidates whose rms_nodes.content no longer hashes as recorded
CREATE OR REPLACE TEMP MACRO rms_replay(rid := NULL) AS TABLE
    WITH picked AS (
        SELECT r.receipt_id, r.bundle_id, r.chain_namespace, r.seq,
               CASE WHEN json_valid(r.receipt) THEN r.receipt END AS j,
               CAST(b.inputs AS VARCHAR) AS inputs, sha256(b.context) AS stored_sha256
        FROM rms_receipts AS r LEFT JOIN rms_bundles AS b ON b.bundle_id = r.bundle_id
        WHERE rid IS NULL OR r.receipt_id = rms_receipt_id(rid)
    ),
    replayed AS (
        SELECT p.*, coalesce(json_extract_string(p.j, '$.context_sha256'), '?') AS recorded_sha256,
               rms_replay_udf(p.inputs, p.j) AS out
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
           coalesce(struct_extract(x.out, 'context_sha256') = x.recorded_sha256
                    AND x.stored_sha256 = x.recorded_sha256, false) AS identical,
           coalesce(struct_extract(x.out, 'same_decisions'), false) AS same_decisions,
           coalesce(struct_extract(x.out, 'encoding_changed'), false) AS encoding_changed,
           coalesce(struct_extract(x.out, 'differing_fields'), []) AS differing_fields,
           coalesce(sha256(x.inputs) = json_extract_string(x.j, '$.inputs_sha256'), false)
               AS inputs_intact,
           coalesce(c.changed_nodes, []) AS changed_nodes,
           struct_extract(x.out, 'error') AS error,
           coalesce(struct_extract(x.out, 'context_sha256') = x.recorded_sha256
                    AND x.stored_sha256 = x.recorded_sha256
                    AND sha256(x.inputs) = json_extract_string(x.j, '$.inputs_sha256')
                    AND struct_extract(x.out, 'same_decisions')
                    AND NOT struct_extract(x.out, 'encoding_changed')
                    AND len(struct_extract(x.out, 'differing_fields')) = 0, false) AS reproduced
    FROM replayed AS x LEFT JOIN changed AS c ON c.receipt_id = x.receipt_id
    ORDER BY x.chain_namespace, x.seq;
COMMENT ON MACRO TABLE rms_replay IS 'rms_replay(rid := NULL): per receipt (all when NULL): recorded vs replayed context_sha256, identical (receipt digest and stored context), same_decisions, encoding_changed, differing_fields, inputs_intact, changed_nodes, error, reproduced (all agree)';

-- rms_store: pack and store in one call, from SQL: the bundle row and its sealed receipt are
-- committed in their own transaction (as rms_duck.pack does); returns the receipt_id.
-- getvariable('rms_store_connection') is replaced by the number of the connection (or cursor)
-- these macros are created on (duck/macros.py): the UDF stores through that one.
CREATE OR REPLACE TEMP MACRO rms_store(candidates, budget, config := NULL, namespace := NULL,
                                       session_id := NULL) AS
    rms_store_udf(rms_candidates_arg(candidates, 'rms_store'),
                  rms_budget_arg(budget, 'rms_store'),
                  CAST(to_json(config) AS VARCHAR), CAST(namespace AS VARCHAR),
                  CAST(session_id AS VARCHAR), getvariable('rms_store_connection'));
COMMENT ON MACRO rms_store IS 'rms_store(candidates, budget, config := NULL, namespace := NULL, session_id := NULL): pack, store the bundle with a chained receipt, return its receipt_id';

-- rms_stem: the exact Snowball stem (PyStemmer) in the index language; shadows the
-- vocabulary lookup of sql/ranking.sql, so query words the index never saw are stemmed too
CREATE OR REPLACE TEMP MACRO rms_stem(term) AS rms_stem_udf(term, rms_index_language());
COMMENT ON MACRO rms_stem IS 'rms_stem(term): the Snowball stem of a lower-cased word in the index language';

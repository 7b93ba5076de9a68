-- rms_duck schema, version 1. Plain DuckDB (no UDFs), idempotent: safe to run again.
-- Every timestamp is TIMESTAMPTZ; rms_duck connections run with TimeZone = 'UTC'.

-- rms_schema_version: the schema versions applied to this database, for migrations
CREATE TABLE IF NOT EXISTS rms_schema_version (
    version     INTEGER PRIMARY KEY,
    applied_at  TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
);
-- version 2 marks the persistent SQL macros; sql_sha256 digests the SQL that created them
ALTER TABLE rms_schema_version ADD COLUMN IF NOT EXISTS sql_sha256 VARCHAR;

-- rms_nodes: memory objects (the RFC-0001 fields that packing reads)
CREATE TABLE IF NOT EXISTS rms_nodes (
    id                  UUID PRIMARY KEY,
    namespace_id        VARCHAR,
    type                VARCHAR NOT NULL DEFAULT 'note' CHECK (type IN (
                            'entity', 'event', 'fact', 'decision', 'preference', 'task',
                            'summary', 'note', 'instruction')),
    content             VARCHAR NOT NULL,
    structured_value    JSON,
    prose               VARCHAR,
    epistemic_type      VARCHAR NOT NULL DEFAULT 'asserted' CHECK (epistemic_type IN (
                            'observed', 'asserted', 'inferred', 'hypothetical', 'conditional',
                            'deprecated', 'unverified')),
    source_type         VARCHAR NOT NULL DEFAULT 'user_stated' CHECK (source_type IN (
                            'user_stated', 'user_demonstrated', 'system_inferred',
                            'external_document', 'tool_output')),
    lifecycle_state     VARCHAR NOT NULL DEFAULT 'tentative' CHECK (lifecycle_state IN (
                            'tentative', 'stable', 'contested', 'superseded', 'deprecated',
                            'archived')),
    confidence          DOUBLE NOT NULL DEFAULT 0.5 CHECK (confidence BETWEEN 0 AND 1),
    salience            DOUBLE NOT NULL DEFAULT 0.5 CHECK (salience BETWEEN 0 AND 1),
    pinned              BOOLEAN NOT NULL DEFAULT false,
    event_time          TIMESTAMPTZ,
    valid_from          TIMESTAMPTZ,
    valid_to            TIMESTAMPTZ,
    created_at          TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    superseded_by       UUID,
    speaker             VARCHAR,
    evidence_ids        UUID[],
    session_id          VARCHAR,
    session_position    INTEGER,
    condition_state     VARCHAR,
    -- RFC Method 3: Method 2 stored at creation, for any INSERT (rms_duck.tokens.estimate.
    -- stored_estimate_sql() writes this expression; it follows the content on every edit)
    token_cost_estimate INTEGER GENERATED ALWAYS AS (
        CAST((length(content) * 6083086
        - length(regexp_replace(content, '[A-Za-z]', '', 'g')) * 273598
        - length(regexp_replace(content, '\p{Cyrillic}', '', 'g')) * 355492
        - length(regexp_replace(content, '\p{Greek}', '', 'g')) * 531067
        - length(regexp_replace(content, '\p{Arabic}', '', 'g')) * 429923
        - length(regexp_replace(content, '\p{Hebrew}', '', 'g')) * 489956
        - length(regexp_replace(content, '\p{Devanagari}', '', 'g')) * 435730
        - length(regexp_replace(content, '\p{Han}', '', 'g')) * 640205
        - length(regexp_replace(content, '\p{Hangul}', '', 'g')) * 769231
        - length(regexp_replace(content, '\p{Hiragana}', '', 'g')) * 694444
        - length(regexp_replace(content, '\p{Katakana}', '', 'g')) * 713267
        - length(regexp_replace(content, '\p{Thai}', '', 'g')) * 416840
        - length(regexp_replace(content, '[0-9]', '', 'g')) * 333333
        + (length(regexp_replace(content, '\s', '', 'g'))
           - length(regexp_replace(content, '[^\p{L}\p{M}\p{N}]', '', 'g'))) * 905797
        + coalesce(TRY_CAST(length(regexp_replace(content, '[^\p{L}\p{M}\p{N}]', '', 'g'))
            - length(content) * 12
            + length(regexp_replace(content, '[A-Za-z]', '', 'g'))
            + length(regexp_replace(content, '\p{Cyrillic}', '', 'g'))
            + length(regexp_replace(content, '\p{Greek}', '', 'g'))
            + length(regexp_replace(content, '\p{Arabic}', '', 'g'))
            + length(regexp_replace(content, '\p{Hebrew}', '', 'g'))
            + length(regexp_replace(content, '\p{Devanagari}', '', 'g'))
            + length(regexp_replace(content, '\p{Han}', '', 'g'))
            + length(regexp_replace(content, '\p{Hangul}', '', 'g'))
            + length(regexp_replace(content, '\p{Hiragana}', '', 'g'))
            + length(regexp_replace(content, '\p{Katakana}', '', 'g'))
            + length(regexp_replace(content, '\p{Thai}', '', 'g'))
            + length(regexp_replace(content, '[0-9]', '', 'g')) AS UBIGINT),
            0) * 1250000
        + 999999) // 1000000 AS INTEGER)
    ) VIRTUAL
);

-- rms_nodes.embedding: an optional vector per node, filled by the caller; the VECTOR path
-- of rms_candidates() compares it with the query embedding (list_cosine_similarity)
ALTER TABLE rms_nodes ADD COLUMN IF NOT EXISTS embedding FLOAT[];

-- rms_edges: typed links between nodes
CREATE TABLE IF NOT EXISTS rms_edges (
    source_id   UUID NOT NULL,
    target_id   UUID NOT NULL,
    kind        VARCHAR NOT NULL CHECK (kind IN (
                    'CONTRADICTS', 'SUPERSEDES', 'SUPPORTS', 'RELATES_TO', 'DERIVED_FROM')),
    created_at  TIMESTAMPTZ NOT NULL DEFAULT current_timestamp,
    PRIMARY KEY (source_id, target_id, kind)
);

-- rms_bundles: every stored pack, with its exact context and the inputs it was packed from
CREATE TABLE IF NOT EXISTS rms_bundles (
    bundle_id           UUID PRIMARY KEY,
    created_at          TIMESTAMPTZ NOT NULL,
    namespace_id        VARCHAR NOT NULL,
    session_id          VARCHAR,
    query_text          VARCHAR,
    context_format      VARCHAR NOT NULL,
    budget              INTEGER NOT NULL,
    available           INTEGER NOT NULL,
    tokens_used         INTEGER NOT NULL,
    context             VARCHAR NOT NULL,
    context_sha256      VARCHAR NOT NULL,
    flags               VARCHAR[] NOT NULL,
    included_count      INTEGER NOT NULL,
    excluded_count      INTEGER NOT NULL,
    str_mean            DOUBLE,
    str_p10             DOUBLE,
    budget_efficiency   DOUBLE,
    budget_waste        DOUBLE,
    inputs              JSON NOT NULL
);

-- rms_receipts: canonical receipt JSON, its digest, and a per-namespace hash chain
CREATE TABLE IF NOT EXISTS rms_receipts (
    receipt_id          UUID PRIMARY KEY,
    bundle_id           UUID NOT NULL UNIQUE,
    created_at          TIMESTAMPTZ NOT NULL,
    chain_namespace     VARCHAR NOT NULL,
    seq                 BIGINT NOT NULL,
    prev_sha256         VARCHAR,
    receipt_version     INTEGER NOT NULL,
    receipt             VARCHAR NOT NULL,
    receipt_sha256      VARCHAR NOT NULL,
    context_sha256      VARCHAR NOT NULL,
    UNIQUE (chain_namespace, seq)
);

-- rms_chain_heads: the newest seq and receipt_sha256 of each chain, updated with every
-- append so that storing needs no scan of rms_receipts. Derived data: storage confirms it
-- against rms_receipts, and verification never relies on it.
CREATE TABLE IF NOT EXISTS rms_chain_heads (
    chain_namespace  VARCHAR PRIMARY KEY,
    seq              BIGINT NOT NULL,
    receipt_sha256   VARCHAR NOT NULL
);

-- rms_receipt_decisions: one row per candidate of every receipt: why it was packed or dropped
-- (order_key 'inf' marks the candidate the balanced ordering reserves first; str is NULL
-- for excluded candidates; has_content says whether a packed record shows memory text, and
-- is NULL in receipts before version 7). Plain SQL over rms_receipts, so any DuckDB client
-- can read it.
CREATE VIEW IF NOT EXISTS rms_receipt_decisions AS
WITH parsed AS (
    SELECT r.receipt_id, r.bundle_id, r.chain_namespace, r.seq, r.created_at,
           CASE WHEN json_valid(r.receipt)
                THEN json_extract_string(r.receipt, '$.session_id') END AS session_id,
           CASE WHEN json_valid(r.receipt)
                THEN from_json(json_extract(r.receipt, '$.candidates'),
                     '[{"id": "VARCHAR", "score": "DOUBLE", "content_sha256": "VARCHAR",
                        "tier": "INTEGER", "order_key": "JSON", "tried": ["VARCHAR"],
                        "chosen": "VARCHAR", "tokens": "INTEGER", "decision": "VARCHAR",
                        "reason": "VARCHAR", "position": "INTEGER",
                        "has_content": "BOOLEAN"}]') END AS candidates
    FROM rms_receipts AS r
),
items AS (
    SELECT p.* EXCLUDE (candidates), unnest(p.candidates) AS c FROM parsed AS p
)
SELECT receipt_id, bundle_id, chain_namespace, seq, created_at, session_id,
       struct_extract(c, 'id') AS node_id,
       struct_extract(c, 'score') AS score,
       struct_extract(c, 'tier') AS tier,
       CASE WHEN json_type(struct_extract(c, 'order_key')) = 'VARCHAR' THEN 'inf'::DOUBLE
            ELSE TRY_CAST(struct_extract(c, 'order_key') AS DOUBLE) END AS order_key,
       struct_extract(c, 'tried') AS tried,
       struct_extract(c, 'chosen') AS chosen,
       struct_extract(c, 'tokens') AS tokens,
       struct_extract(c, 'decision') AS decision,
       struct_extract(c, 'reason') AS reason,
       struct_extract(c, 'position') AS position,
       CASE WHEN struct_extract(c, 'decision') = 'included'
            THEN struct_extract(c, 'score') / greatest(struct_extract(c, 'tokens'), 1) END AS str,
       struct_extract(c, 'content_sha256') AS content_sha256,
       struct_extract(c, 'has_content') AS has_content
FROM items;

-- rms_receipt_problems: every way the stored receipts fail to verify (no rows: all is well).
-- Checks each digest (sha256 of the receipt text), the columns against the digested body,
-- the chain (seq 1, 2, 3 ... and prev_sha256 = sha256 of the previous receipt's text) and
-- the bundle binding (context and inputs digests; every other bundle column against the
-- receipt, or against what the receipt's decisions imply; a bundle for every receipt and back).
CREATE VIEW IF NOT EXISTS rms_receipt_problems AS
WITH hashed AS (
    SELECT r.*, sha256(r.receipt) AS actual_sha256, json_valid(r.receipt) AS is_json
    FROM rms_receipts AS r
),
linked AS (
    SELECT h.*, lag(h.seq) OVER chain AS prior_seq, lag(h.actual_sha256) OVER chain AS prior_sha256,
           CASE WHEN h.is_json THEN h.receipt END AS j
    FROM hashed AS h
    WINDOW chain AS (PARTITION BY h.chain_namespace ORDER BY h.seq)
),
fields AS (
    SELECT l.chain_namespace, l.seq, l.receipt_id, l.bundle_id, unnest([
        {'field': 'receipt_id', 'stored': CAST(l.receipt_id AS VARCHAR),
         'recorded': json_extract_string(l.j, '$.receipt_id')},
        {'field': 'bundle_id', 'stored': CAST(l.bundle_id AS VARCHAR),
         'recorded': json_extract_string(l.j, '$.bundle_id')},
        {'field': 'chain_namespace', 'stored': l.chain_namespace,
         'recorded': json_extract_string(l.j, '$.chain_namespace')},
        {'field': 'seq', 'stored': CAST(l.seq AS VARCHAR),
         'recorded': json_extract_string(l.j, '$.seq')},
        {'field': 'prev_sha256', 'stored': l.prev_sha256,
         'recorded': json_extract_string(l.j, '$.prev_sha256')},
        {'field': 'receipt_version', 'stored': CAST(l.receipt_version AS VARCHAR),
         'recorded': json_extract_string(l.j, '$.receipt_version')},
        {'field': 'context_sha256', 'stored': l.context_sha256,
         'recorded': json_extract_string(l.j, '$.context_sha256')},
        {'field': 'created_at', 'stored': CAST(l.created_at AS VARCHAR),
         'recorded': CAST(TRY_CAST(json_extract_string(l.j, '$.created_at') AS TIMESTAMPTZ)
                          AS VARCHAR)}
    ], recursive := true)
    FROM linked AS l
    WHERE l.is_json
),
decided AS (
    SELECT receipt_id, count(*) FILTER (WHERE decision = 'included') AS included,
           count(*) FILTER (WHERE decision = 'excluded') AS excluded
    FROM (SELECT l.receipt_id,
                 unnest(json_extract_string(l.j, '$.candidates[*].decision')) AS decision
          FROM linked AS l WHERE l.is_json) AS d
    GROUP BY receipt_id
),
bundle_fields AS (
    SELECT l.chain_namespace, l.seq, l.receipt_id, l.bundle_id, unnest([
        {'field': 'tokens_used', 'stored': CAST(b.tokens_used AS VARCHAR),
         'recorded': json_extract_string(l.j, '$.tokens_used')},
        {'field': 'budget', 'stored': CAST(b.budget AS VARCHAR),
         'recorded': json_extract_string(l.j, '$.budget')},
        {'field': 'available', 'stored': CAST(b.available AS VARCHAR),
         'recorded': json_extract_string(l.j, '$.available')},
        {'field': 'context_format', 'stored': b.context_format,
         'recorded': json_extract_string(l.j, '$.config.context_format')},
        {'field': 'flags', 'stored': CAST(to_json(b.flags) AS VARCHAR),
         'recorded': CAST(json_extract(l.j, '$.flags') AS VARCHAR)},
        {'field': 'str_mean', 'stored': CAST(b.str_mean AS VARCHAR),
         'recorded': CAST(CAST(json_extract(l.j, '$.metrics.str_mean') AS DOUBLE) AS VARCHAR)},
        {'field': 'str_p10', 'stored': CAST(b.str_p10 AS VARCHAR),
         'recorded': CAST(CAST(json_extract(l.j, '$.metrics.str_p10') AS DOUBLE) AS VARCHAR)},
        {'field': 'budget_efficiency', 'stored': CAST(b.budget_efficiency AS VARCHAR),
         'recorded': CAST(CAST(json_extract(l.j, '$.metrics.budget_efficiency') AS DOUBLE)
                          AS VARCHAR)},
        {'field': 'budget_waste', 'stored': CAST(b.budget_waste AS VARCHAR),
         'recorded': CAST(CAST(json_extract(l.j, '$.metrics.budget_waste') AS DOUBLE)
                          AS VARCHAR)},
        {'field': 'created_at', 'stored': CAST(b.created_at AS VARCHAR),
         'recorded': CAST(TRY_CAST(json_extract_string(l.j, '$.created_at') AS TIMESTAMPTZ)
                          AS VARCHAR)},
        {'field': 'namespace_id', 'stored': b.namespace_id,
         'recorded': json_extract_string(l.j, '$.chain_namespace')},
        {'field': 'session_id', 'stored': b.session_id,
         'recorded': json_extract_string(l.j, '$.session_id')},
        {'field': 'query_text', 'stored': b.query_text,
         'recorded': json_extract_string(l.j, '$.query.sql')},
        {'field': 'included_count', 'stored': CAST(b.included_count AS VARCHAR),
         'recorded': CAST(coalesce(dc.included, 0) AS VARCHAR)},
        {'field': 'excluded_count', 'stored': CAST(b.excluded_count AS VARCHAR),
         'recorded': CAST(coalesce(dc.excluded, 0) AS VARCHAR)}
    ], recursive := true)
    FROM linked AS l JOIN rms_bundles AS b ON b.bundle_id = l.bundle_id
    LEFT JOIN decided AS dc ON dc.receipt_id = l.receipt_id
    WHERE l.is_json
),
bound AS (
    SELECT l.chain_namespace, l.seq, l.receipt_id, l.bundle_id, l.is_json,
           b.bundle_id IS NOT NULL AS has_bundle,
           coalesce(json_extract_string(l.j, '$.context_sha256'), l.context_sha256)
               AS recorded_context,
           b.context_sha256 AS bundle_context, sha256(b.context) AS actual_context,
           json_extract_string(l.j, '$.inputs_sha256') AS recorded_inputs,
           sha256(CAST(b.inputs AS VARCHAR)) AS actual_inputs
    FROM linked AS l LEFT JOIN rms_bundles AS b ON b.bundle_id = l.bundle_id
)
SELECT chain_namespace, seq, receipt_id, bundle_id, 'MALFORMED_RECEIPT' AS problem,
       'receipt is not valid JSON: its text was edited after it was written; '
       || 'restore the row from a backup' AS detail
FROM linked WHERE NOT is_json
UNION ALL
SELECT chain_namespace, seq, receipt_id, bundle_id, 'DIGEST_MISMATCH',
       'receipt_sha256 is ' || receipt_sha256 || ' but sha256(receipt) is ' || actual_sha256
       || ': the receipt text or its digest was edited; restore the row from a backup'
FROM linked WHERE actual_sha256 IS DISTINCT FROM receipt_sha256
UNION ALL
SELECT chain_namespace, seq, receipt_id, bundle_id, 'FIELD_MISMATCH',
       'column ' || field || ' is ' || coalesce(stored, 'NULL')
       || ' but the digested receipt records ' || coalesce(recorded, 'NULL')
       || ': the row was edited or swapped with another; restore it from a backup'
FROM fields WHERE stored IS DISTINCT FROM recorded
UNION ALL
SELECT chain_namespace, seq, receipt_id, bundle_id, 'CHAIN_GAP',
       CASE WHEN prior_seq IS NULL
            THEN 'the first receipt of the chain has seq ' || seq
                 || ': receipts 1 to ' || (seq - 1) || ' are missing'
            ELSE 'seq ' || seq || ' follows seq ' || prior_seq
                 || ': receipts were deleted or reordered' END
       || '; restore the missing receipts from a backup'
FROM linked WHERE seq IS DISTINCT FROM coalesce(prior_seq, 0) + 1
UNION ALL
SELECT chain_namespace, seq, receipt_id, bundle_id, 'CHAIN_BROKEN',
       'the receipt records prev_sha256 '
       || coalesce(json_extract_string(j, '$.prev_sha256'), 'NULL')
       || ' but the previous receipt in its chain hashes to ' || coalesce(prior_sha256, 'NULL')
       || ': an earlier receipt was edited, deleted or reordered; restore it from a backup'
FROM linked WHERE is_json AND json_extract_string(j, '$.prev_sha256') IS DISTINCT FROM prior_sha256
UNION ALL
SELECT chain_namespace, seq, receipt_id, bundle_id, 'BUNDLE_MISSING',
       'bundle ' || bundle_id || ' of this receipt is not in rms_bundles: it was deleted; '
       || 'restore it from a backup'
FROM bound WHERE NOT has_bundle
UNION ALL
SELECT chain_namespace, seq, receipt_id, bundle_id, 'CONTEXT_MISMATCH',
       'the receipt records context_sha256 ' || recorded_context
       || ' but the bundle row holds context_sha256 ' || bundle_context
       || ' and sha256(context) is ' || actual_context
       || ': the stored context was edited; restore the bundle row from a backup'
FROM bound
WHERE has_bundle AND (actual_context IS DISTINCT FROM recorded_context
                      OR bundle_context IS DISTINCT FROM recorded_context)
UNION ALL
SELECT chain_namespace, seq, receipt_id, bundle_id, 'BUNDLE_FIELD_MISMATCH',
       'bundle column ' || field || ' is ' || coalesce(stored, 'NULL')
       || ' but the digested receipt records ' || coalesce(recorded, 'NULL')
       || ': the bundle row was edited; restore it from a backup'
FROM bundle_fields WHERE stored IS DISTINCT FROM recorded
UNION ALL
SELECT chain_namespace, seq, receipt_id, bundle_id, 'INPUTS_MISMATCH',
       'the receipt records inputs_sha256 ' || coalesce(recorded_inputs, 'NULL')
       || ' but sha256(inputs) is ' || actual_inputs || ': the stored inputs were edited, '
       || 'so a replay cannot be trusted; restore the bundle row from a backup'
FROM bound WHERE has_bundle AND is_json AND actual_inputs IS DISTINCT FROM recorded_inputs
UNION ALL
SELECT b.namespace_id, NULL, NULL, b.bundle_id, 'RECEIPT_MISSING',
       'bundle ' || b.bundle_id || ' has no receipt: its receipt was deleted; '
       || 'restore it from a backup'
FROM rms_bundles AS b ANTI JOIN rms_receipts AS r ON r.bundle_id = b.bundle_id;

-- rms_session_metrics: RFC-0006 section 8 metrics per session, for the feedback loop.
-- STR = score / tokens of each included record (from the receipts); efficiency and waste
-- are included and REFERENCE tokens over the tokens available across the session's bundles;
-- the trends are least-squares slopes of each bundle's str_mean and budget_waste per turn.
-- Float aggregates add in a fixed order (ORDER BY): a parallel scan of a large store
-- would otherwise add in thread order and change the last bits from run to run.
CREATE VIEW IF NOT EXISTS rms_session_metrics AS
WITH records AS (
    SELECT b.session_id, d.str, d.tokens, d.chosen
    FROM rms_receipt_decisions AS d JOIN rms_bundles AS b ON b.bundle_id = d.bundle_id
    WHERE d.decision = 'included'
),
by_records AS (
    SELECT session_id, count(*) AS included_records, avg(str ORDER BY str) AS session_str_mean,
           quantile_cont(str, 0.1) AS session_str_p10, sum(tokens) AS included_tokens,
           coalesce(sum(tokens) FILTER (WHERE chosen = 'reference'), 0) AS reference_tokens
    FROM records GROUP BY session_id
),
turns AS (
    SELECT b.*, row_number() OVER (PARTITION BY b.session_id
                                   ORDER BY b.created_at, b.bundle_id) AS turn
    FROM rms_bundles AS b
),
by_bundles AS (
    SELECT session_id, count(*) AS bundles, min(created_at) AS first_at,
           max(created_at) AS last_at, sum(greatest(available, 0)) AS available_tokens,
           count(*) FILTER (WHERE len(flags) > 0) AS flagged_bundles,
           CASE WHEN regr_count(str_mean, turn) > 1
                THEN regr_slope(str_mean, turn ORDER BY turn) END AS str_mean_trend,
           CASE WHEN regr_count(budget_waste, turn) > 1
                THEN regr_slope(budget_waste, turn ORDER BY turn) END AS budget_waste_trend
    FROM turns GROUP BY session_id
)
SELECT s.session_id, s.bundles, s.first_at, s.last_at,
       coalesce(r.included_records, 0) AS included_records,
       r.session_str_mean, r.session_str_p10,
       coalesce(r.included_tokens, 0) / nullif(s.available_tokens, 0) AS budget_efficiency,
       coalesce(r.reference_tokens, 0) / nullif(s.available_tokens, 0) AS budget_waste,
       s.str_mean_trend, s.budget_waste_trend, s.flagged_bundles
FROM by_bundles AS s
LEFT JOIN by_records AS r ON r.session_id IS NOT DISTINCT FROM s.session_id;

-- rms_query_shapes: stored bundles grouped by ranking-query fingerprint (literals removed);
-- fingerprint is NULL for bundles packed from Arrow input rather than a query
CREATE VIEW IF NOT EXISTS rms_query_shapes AS
WITH q AS (
    SELECT r.bundle_id, r.created_at,
           CASE WHEN json_valid(r.receipt)
                THEN json_extract_string(r.receipt, '$.query.fingerprint') END AS fingerprint,
           CASE WHEN json_valid(r.receipt)
                THEN json_extract_string(r.receipt, '$.query.sql') END AS canonical_sql
    FROM rms_receipts AS r
)
SELECT q.fingerprint, arg_min(q.canonical_sql, q.created_at) AS first_sql,
       count(*) AS bundles, count(DISTINCT q.canonical_sql) AS distinct_sql,
       min(q.created_at) AS first_at, max(q.created_at) AS last_at,
       avg(b.str_mean ORDER BY b.str_mean) AS str_mean,
       avg(b.budget_efficiency ORDER BY b.budget_efficiency) AS budget_efficiency,
       avg(b.budget_waste ORDER BY b.budget_waste) AS budget_waste
FROM q LEFT JOIN rms_bundles AS b ON b.bundle_id = q.bundle_id
GROUP BY q.fingerprint;

-- rms_line_costs: exact token costs of rendered context lines, by encoding and line digest
CREATE TABLE IF NOT EXISTS rms_line_costs (
    encoding     VARCHAR NOT NULL,
    line_sha256  VARCHAR NOT NULL,
    n_tokens     INTEGER NOT NULL,
    PRIMARY KEY (encoding, line_sha256)
);
-- Lookups by line digest probe this index, so their cost does not grow with the table.
CREATE INDEX IF NOT EXISTS rms_line_costs_by_line ON rms_line_costs (line_sha256);

-- rms_stopwords: words the lexical index and queries skip (seeded once; edit, then run
-- rms_duck.duck.ranking.refresh_index(con, full=True))
CREATE TABLE IF NOT EXISTS rms_stopwords (
    word  VARCHAR PRIMARY KEY
);

-- rms_lexical_config: the language of the lexical index (Snowball stemmer, 'none' for
-- none) and the language rms_lexical_terms was built with (NULL: before stemming existed).
-- Change it with rms_duck.duck.ranking.set_index_language(con, 'german').
CREATE TABLE IF NOT EXISTS rms_lexical_config (
    language          VARCHAR NOT NULL,
    indexed_language  VARCHAR
);

-- rms_lexical_stems: every indexed word and its Snowball stem, so that plain DuckDB clients
-- (without rms_duck's Python UDF) stem query words the way the index did
CREATE TABLE IF NOT EXISTS rms_lexical_stems (
    word  VARCHAR PRIMARY KEY,
    stem  VARCHAR NOT NULL
);

-- rms_lexical_docs: one row per indexed node: its content digest and lengths (BM25 and n-grams)
CREATE TABLE IF NOT EXISTS rms_lexical_docs (
    node_id      UUID NOT NULL,
    content_md5  VARCHAR NOT NULL,
    n_terms      INTEGER NOT NULL,
    n_ngrams     INTEGER NOT NULL
);

-- rms_lexical_terms: BM25 postings, the frequency of each word in each indexed node
CREATE TABLE IF NOT EXISTS rms_lexical_terms (
    node_id  UUID NOT NULL,
    term     VARCHAR NOT NULL,
    tf       INTEGER NOT NULL
);

-- rms_lexical_ngrams: the distinct character trigrams of each indexed node
CREATE TABLE IF NOT EXISTS rms_lexical_ngrams (
    node_id  UUID NOT NULL,
    ngram    VARCHAR NOT NULL
);

-- rms_candidate: the canonical candidate STRUCT that pack_context() casts its input to.
-- Whole fields are BIGINT, so a value past 32 bits reaches the Python checks, which name it.
-- Times travel as text: a TIMESTAMPTZ prints with its offset (the exact instant), a naive
-- TIMESTAMP prints without one and stays nominal, whatever the session's time zone.
CREATE TYPE IF NOT EXISTS rms_candidate AS STRUCT(
    id VARCHAR, score DOUBLE, content VARCHAR, type VARCHAR, paths VARCHAR[],
    path_count BIGINT, salience DOUBLE, pinned BOOLEAN, confidence DOUBLE,
    epistemic_type VARCHAR, source_type VARCHAR, lifecycle_state VARCHAR,
    namespace_id VARCHAR, event_time VARCHAR, valid_from VARCHAR,
    valid_to VARCHAR, superseded_by VARCHAR, speaker VARCHAR, evidence_ids VARCHAR[],
    structured_value VARCHAR, prose VARCHAR, contradicts VARCHAR[], session_id VARCHAR,
    session_position BIGINT, condition_state VARCHAR, token_cost_estimate BIGINT
);

-- rms_stopwords seed: common English function words (only while the table is empty)
INSERT INTO rms_stopwords
SELECT unnest(string_split(
    'a,about,after,again,all,am,an,and,any,are,as,at,be,been,before,being,but,by,can,could,'
    'did,do,does,doing,for,from,had,has,have,having,he,her,here,hers,him,his,how,i,if,in,'
    'into,is,it,its,just,me,my,no,nor,not,of,on,or,our,ours,she,should,so,some,such,than,'
    'that,the,their,theirs,them,then,there,these,they,this,those,to,too,very,was,we,were,'
    'what,when,where,which,while,who,whom,why,will,with,would,you,your,yours', ','))
WHERE NOT EXISTS (SELECT 1 FROM rms_stopwords);

INSERT INTO rms_lexical_config (language, indexed_language)
SELECT 'english', NULL WHERE NOT EXISTS (SELECT 1 FROM rms_lexical_config);

INSERT INTO rms_schema_version (version)
SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM rms_schema_version WHERE version = 1);

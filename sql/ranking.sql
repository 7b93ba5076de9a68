-- rms_duck ranking: retrieval paths over rms_nodes and their merge, as table macros.
-- Pure SQL (no UDFs), so they persist in the database and plain DuckDB clients can rank.
-- The lexical paths read the index tables that rms_duck.duck.ranking.refresh_index(con)
-- keeps current (sql/lexical_refresh.sql); rms_candidates() refuses a stale index.
-- Every path filters to the namespace (NULL: all) and to retrievable lifecycle states.

-- rms_split_terms: the words of a text as the lexical index sees them (lower case, letters and digits)
CREATE OR REPLACE MACRO rms_split_terms(text) AS
    list_filter(regexp_split_to_array(lower(text), '[^\p{L}\p{N}]+'), lambda w: w <> '');
COMMENT ON MACRO rms_split_terms IS 'rms_split_terms(text): lower-cased words (runs of letters and digits), in order';

-- rms_padded_ngrams: helper of rms_char_ngrams over already normalised text
CREATE OR REPLACE MACRO rms_padded_ngrams(t) AS
    list_distinct(list_transform(range(1, length(t) - 1), lambda i: substring(t, i, 3)));
COMMENT ON MACRO rms_padded_ngrams IS 'rms_padded_ngrams(text): distinct trigrams of text as given (helper)';

-- rms_word_ngrams: the distinct character trigrams of one word padded with spaces
CREATE OR REPLACE MACRO rms_word_ngrams(word) AS rms_padded_ngrams(' ' || word || ' ');
COMMENT ON MACRO rms_word_ngrams IS 'rms_word_ngrams(word): distinct trigrams of the word padded with a space on each side';

-- rms_char_ngrams: the distinct character trigrams of the words of a text
CREATE OR REPLACE MACRO rms_char_ngrams(text) AS
    list_distinct(flatten(list_transform(rms_split_terms(text), lambda w: rms_word_ngrams(w))));
COMMENT ON MACRO rms_char_ngrams IS 'rms_char_ngrams(text): distinct trigrams of its words (the index also drops stopwords)';

-- rms_retrievable: whether a node may be retrieved (RFC-0005 default retrieval)
CREATE OR REPLACE MACRO rms_retrievable(lifecycle_state) AS
    lifecycle_state IN ('tentative', 'stable', 'contested');
COMMENT ON MACRO rms_retrievable IS 'rms_retrievable(lifecycle_state): true for tentative, stable and contested nodes';

-- rms_ranking_weights: validated composite weights; without a query embedding the vector
-- weight is shared out over the other signals in proportion, so scores still reach 1
CREATE OR REPLACE MACRO rms_ranking_weights(weights, has_vector) AS (
    WITH given AS (
        SELECT CASE WHEN weights IS NULL
                    THEN {'lexical': 0.45, 'ngram': 0.25, 'vector': 0.2, 'salience': 0.1}
                    ELSE CAST(weights AS STRUCT(lexical DOUBLE, ngram DOUBLE, vector DOUBLE,
                                                salience DOUBLE)) END AS w
    ),
    parts AS (
        SELECT coalesce(struct_extract(w, 'lexical'), 0) AS lexical,
               coalesce(struct_extract(w, 'ngram'), 0) AS ngram,
               coalesce(struct_extract(w, 'vector'), 0) AS vector,
               coalesce(struct_extract(w, 'salience'), 0) AS salience
        FROM given
    ),
    checked AS (
        SELECT CASE
            WHEN least(lexical, ngram, vector, salience) < 0
                 OR abs(lexical + ngram + vector + salience - 1) > 1e-9
            THEN error('ranking weights must be >= 0 and sum to 1, got '
                       || CAST(to_json({'lexical': lexical, 'ngram': ngram, 'vector': vector,
                                        'salience': salience}) AS VARCHAR)
                       || '; fields: lexical, ngram, vector, salience (missing fields are 0)')
            ELSE 1 END AS ok, *,
            CASE WHEN has_vector OR vector >= 1 THEN 1.0 ELSE 1.0 / (1 - vector) END AS scale
        FROM parts
    )
    SELECT {'lexical': lexical * scale * ok, 'ngram': ngram * scale,
            'vector': CASE WHEN has_vector THEN vector ELSE 0.0 END,
            'salience': salience * scale}
    FROM checked
);
COMMENT ON MACRO rms_ranking_weights IS 'rms_ranking_weights(weights, has_vector): checked composite weights (lexical, ngram, vector, salience; sum 1)';

-- rms_bm25: the LEXICAL path, Okapi BM25 over the indexed words of each node
CREATE OR REPLACE MACRO rms_bm25(query, namespace := NULL, k1 := 1.2, b := 0.75) AS TABLE
    WITH params AS (SELECT CAST(k1 AS DOUBLE) AS k1, CAST(b AS DOUBLE) AS b),
    q AS (
        SELECT DISTINCT term
        FROM (SELECT unnest(rms_split_terms(query)) AS term)
        WHERE term NOT IN (SELECT word FROM rms_stopwords)
    ),
    docs AS (
        SELECT d.node_id, d.n_terms
        FROM rms_lexical_docs AS d JOIN rms_nodes AS n ON n.id = d.node_id
        WHERE (namespace IS NULL OR n.namespace_id = namespace)
          AND rms_retrievable(n.lifecycle_state)
    ),
    stats AS (SELECT count(*) AS n_docs, avg(n_terms) AS avgdl FROM docs),
    hits AS (
        SELECT t.node_id, t.term, t.tf, docs.n_terms
        FROM rms_lexical_terms AS t JOIN docs USING (node_id) JOIN q USING (term)
    ),
    df AS (SELECT term, count(*) AS n FROM hits GROUP BY term),
    terms AS (
        SELECT h.node_id,
               ln(1 + (s.n_docs - df.n + 0.5) / (df.n + 0.5))
               * h.tf * (p.k1 + 1)
               / (h.tf + p.k1 * (1 - p.b + p.b * h.n_terms / s.avgdl)) AS part
        FROM hits AS h JOIN df USING (term), stats AS s, params AS p
    )
    SELECT node_id, sum(part) AS bm25 FROM terms GROUP BY node_id;
COMMENT ON MACRO TABLE rms_bm25 IS 'rms_bm25(query, namespace := NULL, k1 := 1.2, b := 0.75): node_id, bm25 for nodes sharing a word with the query';

-- rms_ngram_similarity: the NGRAM path, cosine over the sets of character trigrams
CREATE OR REPLACE MACRO rms_ngram_similarity(query, namespace := NULL) AS TABLE
    WITH words AS (
        SELECT DISTINCT term
        FROM (SELECT unnest(rms_split_terms(query)) AS term)
        WHERE term NOT IN (SELECT word FROM rms_stopwords)
    ),
    q AS (SELECT DISTINCT unnest(rms_word_ngrams(term)) AS ngram FROM words),
    qn AS (SELECT count(*) AS n FROM q),
    docs AS (
        SELECT d.node_id, d.n_ngrams
        FROM rms_lexical_docs AS d JOIN rms_nodes AS n ON n.id = d.node_id
        WHERE (namespace IS NULL OR n.namespace_id = namespace)
          AND rms_retrievable(n.lifecycle_state)
    ),
    shared AS (
        SELECT g.node_id, count(*) AS n
        FROM rms_lexical_ngrams AS g JOIN docs USING (node_id) JOIN q USING (ngram)
        GROUP BY g.node_id
    )
    SELECT s.node_id, s.n / sqrt(qn.n * d.n_ngrams) AS similarity
    FROM shared AS s JOIN docs AS d USING (node_id), qn;
COMMENT ON MACRO TABLE rms_ngram_similarity IS 'rms_ngram_similarity(query, namespace := NULL): node_id, trigram-set cosine in [0, 1]';

-- rms_vector_similarity: the VECTOR path, cosine between rms_nodes.embedding and the query's
CREATE OR REPLACE MACRO rms_vector_similarity(query_embedding, namespace := NULL) AS TABLE
    SELECT n.id AS node_id,
           list_cosine_similarity(n.embedding, CAST(query_embedding AS FLOAT[])) AS similarity
    FROM rms_nodes AS n
    WHERE query_embedding IS NOT NULL AND n.embedding IS NOT NULL
      AND (namespace IS NULL OR n.namespace_id = namespace)
      AND rms_retrievable(n.lifecycle_state);
COMMENT ON MACRO TABLE rms_vector_similarity IS 'rms_vector_similarity(query_embedding, namespace := NULL): node_id, cosine with rms_nodes.embedding';

-- rms_pinned_and_tasks: RFC-0005 4.4, pinned nodes and active tasks, whatever the query
CREATE OR REPLACE MACRO rms_pinned_and_tasks(namespace := NULL) AS TABLE
    SELECT n.id AS node_id, 'PINNED' AS path
    FROM rms_nodes AS n
    WHERE (n.pinned OR n.salience = 1.0)
      AND (namespace IS NULL OR n.namespace_id = namespace) AND rms_retrievable(n.lifecycle_state)
    UNION ALL
    SELECT n.id AS node_id, 'ACTIVE_TASK' AS path
    FROM rms_nodes AS n
    WHERE n.type = 'task' AND n.lifecycle_state IN ('tentative', 'stable')
      AND (namespace IS NULL OR n.namespace_id = namespace);
COMMENT ON MACRO TABLE rms_pinned_and_tasks IS 'rms_pinned_and_tasks(namespace := NULL): node_id, path (PINNED or ACTIVE_TASK)';

-- rms_candidate_scores: the merge, one row per node with its paths, signals and composite score
CREATE OR REPLACE MACRO rms_candidate_scores(query, namespace := NULL, k := 50,
                                                  query_embedding := NULL, weights := NULL,
                                                  ngram_min := 0.2) AS TABLE
    WITH w AS (
        SELECT rms_ranking_weights(weights, query_embedding IS NOT NULL) AS w
    ),
    lex AS (
        SELECT node_id, bm25 / max(bm25) OVER () AS signal,
               row_number() OVER (ORDER BY bm25 DESC, node_id) AS rnk
        FROM rms_bm25(query, namespace) WHERE bm25 > 0
    ),
    ngr AS (
        SELECT node_id, similarity AS signal,
               row_number() OVER (ORDER BY similarity DESC, node_id) AS rnk
        FROM rms_ngram_similarity(query, namespace)
    ),
    vec AS (
        SELECT node_id, greatest(similarity, 0) AS signal,
               row_number() OVER (ORDER BY similarity DESC, node_id) AS rnk
        FROM rms_vector_similarity(query_embedding, namespace)
    ),
    hits AS (
        SELECT node_id, 'LEXICAL' AS path FROM lex WHERE rnk <= k
        UNION ALL
        SELECT node_id, 'NGRAM' AS path FROM ngr WHERE rnk <= k AND signal >= ngram_min
        UNION ALL
        SELECT node_id, 'VECTOR' AS path FROM vec WHERE rnk <= k AND signal > 0
        UNION ALL
        SELECT node_id, path FROM rms_pinned_and_tasks(namespace)
    ),
    merged AS (
        SELECT node_id, list_sort(list_distinct(list(path))) AS paths FROM hits GROUP BY node_id
    ),
    scored AS (
        SELECT m.node_id, m.paths, len(m.paths) AS path_count,
               coalesce(lex.signal, 0) AS lexical, coalesce(ngr.signal, 0) AS ngram,
               coalesce(vec.signal, 0) AS vector, n.salience,
               least(1.0, greatest(0.0,
                   struct_extract(w.w, 'lexical') * coalesce(lex.signal, 0)
                   + struct_extract(w.w, 'ngram') * coalesce(ngr.signal, 0)
                   + struct_extract(w.w, 'vector') * coalesce(vec.signal, 0)
                   + struct_extract(w.w, 'salience') * n.salience)) AS score,
               n.created_at,
               list_contains(m.paths, 'PINNED') OR list_contains(m.paths, 'ACTIVE_TASK') AS kept
        FROM merged AS m JOIN rms_nodes AS n ON n.id = m.node_id
        LEFT JOIN lex USING (node_id) LEFT JOIN ngr USING (node_id) LEFT JOIN vec USING (node_id),
        w
    )
    SELECT node_id, score, paths, path_count, lexical, ngram, vector, salience
    FROM scored
    ORDER BY kept DESC, score DESC, created_at DESC, node_id
    LIMIT k;
COMMENT ON MACRO TABLE rms_candidate_scores IS 'rms_candidate_scores(query, namespace, k, query_embedding, weights, ngram_min): per node paths, signals and composite score';

-- rms_lexical_index_status: whether the lexical index is current (else run refresh_index)
CREATE OR REPLACE MACRO rms_lexical_index_status() AS TABLE
    SELECT count(*) FILTER (WHERE d.node_id IS NOT NULL AND n.id IS NOT NULL
                            AND d.content_md5 = md5(n.content)) AS indexed,
           count(*) FILTER (WHERE d.node_id IS NULL) AS missing,
           count(*) FILTER (WHERE d.node_id IS NOT NULL AND n.id IS NOT NULL
                            AND d.content_md5 <> md5(n.content)) AS stale,
           count(*) FILTER (WHERE n.id IS NULL) AS orphaned
    FROM rms_nodes AS n FULL OUTER JOIN rms_lexical_docs AS d ON d.node_id = n.id;
COMMENT ON MACRO TABLE rms_lexical_index_status IS 'rms_lexical_index_status(): nodes indexed, missing, stale (edited) and orphaned (deleted) in the lexical index';

-- rms_index_guard: one row (ok = true), or an error when nodes are missing from the lexical
-- index or changed since it was built: ranking on it would silently miss them
CREATE OR REPLACE MACRO rms_index_guard(stale_ok := false) AS TABLE
    SELECT CASE WHEN (missing > 0 OR stale > 0) AND NOT stale_ok
                THEN error('rms_candidates: the lexical index is out of date (' || missing
                           || ' of ' || (indexed + missing + stale) || ' nodes not indexed, '
                           || stale || ' changed since); run rms_duck.refresh_index(con) '
                           || '(rms_duck.pack() does it for you on a writable connection), '
                           || 'or pass stale_ok := true to rank on the index as it is')
                ELSE true END AS ok
    FROM rms_lexical_index_status();
COMMENT ON MACRO TABLE rms_index_guard IS 'rms_index_guard(stale_ok := false): one row, ok = true; an error when the lexical index is out of date';

-- rms_candidates: ranked candidates with exactly the columns pack_context() reads
CREATE OR REPLACE MACRO rms_candidates(query, namespace := NULL, k := 50,
                                            query_embedding := NULL, weights := NULL,
                                            ngram_min := 0.2, stale_ok := false) AS TABLE
    SELECT CAST(n.id AS VARCHAR) AS id, s.score, n.content, n.type, s.paths,
           CAST(s.path_count AS INTEGER) AS path_count, n.salience, n.pinned, n.confidence,
           n.epistemic_type, n.source_type, n.lifecycle_state, n.namespace_id, n.event_time,
           n.valid_from, n.valid_to, CAST(n.superseded_by AS VARCHAR) AS superseded_by,
           n.speaker, CAST(n.evidence_ids AS VARCHAR[]) AS evidence_ids,
           CAST(n.structured_value AS VARCHAR) AS structured_value, n.prose,
           coalesce((
               SELECT list(DISTINCT CAST(CASE WHEN e.source_id = n.id THEN e.target_id
                                              ELSE e.source_id END AS VARCHAR))
               FROM rms_edges AS e
               WHERE e.kind = 'CONTRADICTS' AND (e.source_id = n.id OR e.target_id = n.id)
           ), CAST([] AS VARCHAR[])) AS contradicts,
           n.session_id, n.session_position, n.condition_state, n.token_cost_estimate
    FROM rms_index_guard(stale_ok) AS g,
         rms_candidate_scores(query, namespace, k, query_embedding, weights, ngram_min) AS s
    JOIN rms_nodes AS n ON n.id = s.node_id
    WHERE g.ok
    ORDER BY s.score DESC, n.created_at DESC, n.id;
COMMENT ON MACRO TABLE rms_candidates IS 'rms_candidates(query, namespace := NULL, k := 50, query_embedding := NULL, weights := NULL, ngram_min := 0.2, stale_ok := false): ranked rows for pack_context(list(c), budget); an error when the lexical index is stale';

-- rms_duck ranking: retrieval paths over rms_nodes and their merge, as table macros.
-- Pure SQL, so they persist in the database and plain DuckDB clients can rank. Word stems
-- come from rms_lexical_stems, which refresh_index fills with the Snowball stems of every
-- indexed word; on a registered connection, rms_stem() is the Python UDF itself (a TEMP
-- macro of sql/python_macros.sql), so query words the index never saw are stemmed too.
-- The lexical paths read the index tables that rms_duck.duck.ranking.refresh_index(con)
-- keeps current (sql/lexical_refresh.sql); rms_candidates() refuses a stale index.
-- Every CTE is MATERIALIZED: left to decide per CTE whether to inline it, DuckDB's optimizer
-- made planning most of a ranking query's time; marked, the same rows come a quarter to two
-- fifths sooner (test_materialized_ctes_rank_exactly_as_unmarked_ones checks the rows).

-- rms_split_terms: the words of a text as the lexical index sees them (lower case, letters and digits)
CREATE OR REPLACE MACRO rms_split_terms(text) AS
    list_filter(regexp_split_to_array(lower(text), '[^\p{L}\p{N}]+'), lambda w: w <> '');
COMMENT ON MACRO rms_split_terms IS 'rms_split_terms(text): lower-cased words (runs of letters and digits), in order';

-- rms_index_language: the language the lexical index holds stems of ('none' before the
-- first refresh_index with stemming, so an older index still answers)
CREATE OR REPLACE MACRO rms_index_language() AS
    coalesce((SELECT first(indexed_language) FROM rms_lexical_config), 'none');
COMMENT ON MACRO rms_index_language IS 'rms_index_language(): the Snowball language of the lexical index (none: words as they are)';

-- rms_stem: a word as the BM25 index stores it: its stem from the index's vocabulary, or
-- the word itself when the index never saw it (shadowed by the exact UDF on a registered
-- connection, sql/python_macros.sql)
CREATE OR REPLACE MACRO rms_stem(term) AS
    coalesce((SELECT first(s.stem) FROM rms_lexical_stems AS s WHERE s.word = term), term);
COMMENT ON MACRO rms_stem IS 'rms_stem(term): the stem of a lower-cased word as the index stores it (vocabulary lookup; the Snowball UDF once registered)';

-- rms_query_terms: the distinct stems of a query's words, stop words left out
CREATE OR REPLACE MACRO rms_query_terms(query) AS TABLE
    SELECT DISTINCT rms_stem(term) AS term
    FROM (SELECT unnest(rms_split_terms(query)) AS term)
    WHERE term NOT IN (SELECT word FROM rms_stopwords);
COMMENT ON MACRO TABLE rms_query_terms IS 'rms_query_terms(query): term, the distinct stems of its words without stop words';

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

-- rms_json_number: a numeric field of a JSON object as DOUBLE (fallback when absent or null),
-- or an error naming the field and what it belongs to
CREATE OR REPLACE MACRO rms_json_number(j, field, fallback, what) AS
    CASE WHEN json_type(j, field) IS NULL OR json_type(j, field) = 'NULL' THEN fallback
         WHEN json_type(j, field) IN ('UBIGINT', 'BIGINT', 'DOUBLE')
         THEN CAST(j->>field AS DOUBLE)
         ELSE error(what || ': field ' || field || ' must be a number, got '
                    || CAST(j->field AS VARCHAR)) END;
COMMENT ON MACRO rms_json_number IS 'rms_json_number(j, field, fallback, what): the field as DOUBLE, fallback when absent; an error naming it when it is not a number';

-- rms_json_object_keys: the keys of a JSON object, or an error naming `what` when the value
-- is not an object
CREATE OR REPLACE MACRO rms_json_object_keys(j, what, example) AS
    CASE WHEN json_type(j) = 'OBJECT' THEN json_keys(j)
         ELSE error(what || ' must be a STRUCT or JSON object such as ' || example || ', got '
                    || CAST(j AS VARCHAR)) END;
COMMENT ON MACRO rms_json_object_keys IS 'rms_json_object_keys(j, what, example): json_keys(j); an error naming what when j is not an object';

-- rms_ranking_weights: validated composite weights; without a query embedding the vector
-- weight is shared out over the other signals in proportion, so scores still reach 1
CREATE OR REPLACE MACRO rms_ranking_weights(weights, has_vector) AS (
    -- Read as JSON (a STRUCT, MAP or JSON text alike), not through a STRUCT cast: a cast
    -- drops a misspelt field without a word (or fails in the binder, naming no field).
    WITH given AS MATERIALIZED (
        SELECT CASE WHEN weights IS NULL
                    THEN CAST('{"lexical": 0.45, "ngram": 0.25, "vector": 0.2, "salience": 0.1}'
                              AS JSON)
                    -- TRY_CAST: malformed JSON text fails in the cast naming no argument
                    WHEN TRY_CAST(weights AS JSON) IS NULL
                    THEN error('ranking weights must be a STRUCT, MAP or JSON object such as '
                               || '{''lexical'': 0.6, ''ngram'': 0.4}, got '
                               || CAST(weights AS VARCHAR) || ' (not valid JSON)')
                    ELSE TRY_CAST(weights AS JSON) END AS j
    ),
    parts AS MATERIALIZED (
        SELECT rms_json_number(j, 'lexical', 0, 'ranking weights') AS lexical,
               rms_json_number(j, 'ngram', 0, 'ranking weights') AS ngram,
               rms_json_number(j, 'vector', 0, 'ranking weights') AS vector,
               rms_json_number(j, 'salience', 0, 'ranking weights') AS salience,
               list_filter(rms_json_object_keys(j, 'ranking weights',
                                                '{''lexical'': 0.6, ''ngram'': 0.4}'),
                           lambda x: x NOT IN ('lexical', 'ngram', 'vector', 'salience'))
                   AS unknown
        FROM given
    ),
    checked AS MATERIALIZED (
        SELECT CASE
            WHEN len(unknown) > 0
            THEN error('ranking weights: unknown field(s) ' || array_to_string(unknown, ', ')
                       || '; fields: lexical, ngram, vector, salience (missing fields are 0)')
            WHEN least(lexical, ngram, vector, salience) < 0
                 OR abs(lexical + ngram + vector + salience - 1) > 1e-9
                 OR NOT isfinite(lexical + ngram + vector + salience)
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

-- rms_bm25_part: one term's Okapi BM25 contribution to one node
CREATE OR REPLACE MACRO rms_bm25_part(tf, n_terms, df, n_docs, avgdl, k1, b) AS
    ln(1 + (n_docs - df + 0.5) / (df + 0.5)) * tf * (k1 + 1)
    / (tf + k1 * (1 - b + b * n_terms / avgdl));
COMMENT ON MACRO rms_bm25_part IS 'rms_bm25_part(tf, n_terms, df, n_docs, avgdl, k1, b): one term''s BM25 score in one node (helper)';

-- Every floating-point sum here is sum(x ORDER BY x): addition rounds differently in another
-- order, and a parallel aggregate adds in whatever order its threads finish, so a plain sum
-- gave scores that differed in the last bit from run to run on a large store. Summed in
-- value order, a group gives the same bits on every run and in every plan.

-- rms_bm25_k1: k1 as DOUBLE, or an error naming fn when k1 is not a finite number >= 0 or b
-- is not in [0, 1] (they gave negative, NaN, NULL or infinite scores without a word)
CREATE OR REPLACE MACRO rms_bm25_k1(k1, b, fn) AS
    CASE WHEN isfinite(TRY_CAST(k1 AS DOUBLE)) AND TRY_CAST(k1 AS DOUBLE) >= 0
              AND TRY_CAST(b AS DOUBLE) BETWEEN 0 AND 1
         THEN CAST(k1 AS DOUBLE)
         ELSE error(fn || ': k1 must be a finite number >= 0 and b a number in [0, 1], got k1 '
                    || coalesce(CAST(k1 AS VARCHAR), 'NULL') || ', b '
                    || coalesce(CAST(b AS VARCHAR), 'NULL')
                    || '; pass for example k1 := 1.2, b := 0.75') END;
COMMENT ON MACRO rms_bm25_k1 IS 'rms_bm25_k1(k1, b, fn): k1 as DOUBLE; an error naming fn when k1 is not a finite number >= 0 or b is not in [0, 1]';

-- rms_bm25_terms: Okapi BM25 for a weighted list of index terms (stems), each part scaled
-- by its term's weight; rms_bm25 and the feedback expansion both use it
CREATE OR REPLACE MACRO rms_bm25_terms(terms, namespace := NULL, k1 := 1.2, b := 0.75) AS TABLE
    WITH params AS MATERIALIZED (SELECT rms_bm25_k1(k1, b, 'rms_bm25_terms') AS k1,
                                        CAST(b AS DOUBLE) AS b),
    q AS MATERIALIZED (
        SELECT t.term AS term, max(t.weight) AS weight
        FROM (SELECT unnest(CAST(terms AS STRUCT(term VARCHAR, weight DOUBLE)[])) AS t)
        GROUP BY t.term
    ),
    docs AS MATERIALIZED (
        SELECT d.node_id, d.n_terms
        FROM rms_lexical_docs AS d JOIN rms_nodes AS n ON n.id = d.node_id
        WHERE (namespace IS NULL OR n.namespace_id = namespace)
          AND rms_retrievable(n.lifecycle_state)
    ),
    stats AS MATERIALIZED (SELECT count(*) AS n_docs, avg(n_terms) AS avgdl FROM docs),
    hits AS MATERIALIZED (
        SELECT t.node_id, t.term, t.tf, docs.n_terms, q.weight
        FROM rms_lexical_terms AS t JOIN docs USING (node_id) JOIN q USING (term)
    ),
    df AS MATERIALIZED (SELECT term, count(*) AS n FROM hits GROUP BY term),
    parts AS MATERIALIZED (
        SELECT h.node_id,
               h.weight * rms_bm25_part(h.tf, h.n_terms, df.n, s.n_docs, s.avgdl, p.k1, p.b)
                   AS part
        FROM hits AS h JOIN df USING (term), stats AS s, params AS p
    )
    SELECT node_id, sum(part ORDER BY part) AS bm25 FROM parts GROUP BY node_id;
COMMENT ON MACRO TABLE rms_bm25_terms IS 'rms_bm25_terms(terms STRUCT(term, weight)[], namespace := NULL, k1 := 1.2, b := 0.75): node_id, weighted BM25 over index stems';

-- rms_bm25: the LEXICAL path, Okapi BM25 over the stems of each node's words (the same
-- sum as rms_bm25_terms with every weight 1; a macro of its own because DuckDB refuses a
-- table macro nested in its own argument, which feedback would otherwise need)
CREATE OR REPLACE MACRO rms_bm25(query, namespace := NULL, k1 := 1.2, b := 0.75) AS TABLE
    WITH params AS MATERIALIZED (SELECT rms_bm25_k1(k1, b, 'rms_bm25') AS k1,
                                        CAST(b AS DOUBLE) AS b),
    q AS MATERIALIZED (SELECT term FROM rms_query_terms(query)),
    docs AS MATERIALIZED (
        SELECT d.node_id, d.n_terms
        FROM rms_lexical_docs AS d JOIN rms_nodes AS n ON n.id = d.node_id
        WHERE (namespace IS NULL OR n.namespace_id = namespace)
          AND rms_retrievable(n.lifecycle_state)
    ),
    stats AS MATERIALIZED (SELECT count(*) AS n_docs, avg(n_terms) AS avgdl FROM docs),
    hits AS MATERIALIZED (
        SELECT t.node_id, t.term, t.tf, docs.n_terms
        FROM rms_lexical_terms AS t JOIN docs USING (node_id) JOIN q USING (term)
    ),
    df AS MATERIALIZED (SELECT term, count(*) AS n FROM hits GROUP BY term),
    parts AS MATERIALIZED (
        SELECT h.node_id,
               rms_bm25_part(h.tf, h.n_terms, df.n, s.n_docs, s.avgdl, p.k1, p.b) AS part
        FROM hits AS h JOIN df USING (term), stats AS s, params AS p
    )
    SELECT node_id, sum(part ORDER BY part) AS bm25 FROM parts GROUP BY node_id;
COMMENT ON MACRO TABLE rms_bm25 IS 'rms_bm25(query, namespace := NULL, k1 := 1.2, b := 0.75): node_id, bm25 for nodes sharing a word stem with the query';

-- rms_count_arg: a whole-number argument >= 0 as BIGINT, or an error naming the macro and the
-- argument (a negative one failed as "LIMIT/OFFSET cannot be negative", 2.5 was rounded, and
-- NULL or true passed as no limit or 1 without a word)
CREATE OR REPLACE MACRO rms_count_arg(value, fn, name, example) AS
    CASE WHEN typeof(value) <> 'BOOLEAN' AND isfinite(TRY_CAST(value AS DOUBLE))
              AND TRY_CAST(value AS DOUBLE) >= 0
              AND TRY_CAST(value AS DOUBLE) = floor(TRY_CAST(value AS DOUBLE))
              AND TRY_CAST(value AS DOUBLE) <= 4611686018427387904
         THEN CAST(value AS BIGINT)
         ELSE error(fn || ': ' || name || ' must be a whole number >= 0, got '
                    || coalesce(CAST(value AS VARCHAR), 'NULL') || '; pass for example '
                    || name || ' := ' || example) END;
COMMENT ON MACRO rms_count_arg IS 'rms_count_arg(value, fn, name, example): value as BIGINT; an error naming fn and name when it is not a whole number >= 0';

-- rms_feedback_terms: pseudo-relevance feedback (RM3-style): the stems that weigh most in
-- the top `docs` BM25 hits (term frequency in the hit x the hit's share of the score x
-- rarity), the query's own stems left out; weights scaled so the first is 1
CREATE OR REPLACE MACRO rms_feedback_terms(query, namespace := NULL, docs := 5, terms := 10) AS TABLE
    WITH first AS MATERIALIZED (
        SELECT node_id, bm25 FROM rms_bm25(query, namespace)
        ORDER BY bm25 DESC, node_id LIMIT rms_count_arg(docs, 'rms_feedback_terms', 'docs', '5')
    ),
    share AS MATERIALIZED (
        SELECT node_id, bm25 / (SELECT sum(bm25 ORDER BY bm25) FROM first) AS w FROM first
    ),
    scope AS MATERIALIZED (
        SELECT d.node_id FROM rms_lexical_docs AS d JOIN rms_nodes AS n ON n.id = d.node_id
        WHERE (namespace IS NULL OR n.namespace_id = namespace)
          AND rms_retrievable(n.lifecycle_state)
    ),
    picked AS MATERIALIZED (
        SELECT t.term, sum(s.w * t.tf / greatest(d.n_terms, 1)
                           ORDER BY s.w * t.tf / greatest(d.n_terms, 1)) AS mass
        FROM share AS s JOIN rms_lexical_terms AS t USING (node_id)
        JOIN rms_lexical_docs AS d USING (node_id)
        WHERE t.term NOT IN (SELECT term FROM rms_query_terms(query))
        GROUP BY t.term
    ),
    df AS MATERIALIZED (
        SELECT t.term, count(*) AS n
        FROM rms_lexical_terms AS t JOIN scope USING (node_id)
        WHERE t.term IN (SELECT term FROM picked)
        GROUP BY t.term
    ),
    weighted AS MATERIALIZED (
        SELECT p.term, p.mass * ln(1 + (SELECT count(*) FROM scope) / df.n) AS w
        FROM picked AS p JOIN df USING (term)
    )
    SELECT term, w / max(w) OVER () AS weight
    FROM weighted ORDER BY w DESC, term
    LIMIT rms_count_arg(terms, 'rms_feedback_terms', 'terms', '10');
COMMENT ON MACRO TABLE rms_feedback_terms IS 'rms_feedback_terms(query, namespace := NULL, docs := 5, terms := 10): term, weight: RM3-style expansion stems from the top BM25 hits';

-- rms_ngram_similarity: the NGRAM path, cosine over the sets of character trigrams
CREATE OR REPLACE MACRO rms_ngram_similarity(query, namespace := NULL) AS TABLE
    WITH words AS MATERIALIZED (
        SELECT DISTINCT term
        FROM (SELECT unnest(rms_split_terms(query)) AS term)
        WHERE term NOT IN (SELECT word FROM rms_stopwords)
    ),
    q AS MATERIALIZED (SELECT DISTINCT unnest(rms_word_ngrams(term)) AS ngram FROM words),
    qn AS MATERIALIZED (SELECT count(*) AS n FROM q),
    docs AS MATERIALIZED (
        SELECT d.node_id, d.n_ngrams
        FROM rms_lexical_docs AS d JOIN rms_nodes AS n ON n.id = d.node_id
        WHERE (namespace IS NULL OR n.namespace_id = namespace)
          AND rms_retrievable(n.lifecycle_state)
    ),
    shared AS MATERIALIZED (
        SELECT g.node_id, count(*) AS n
        FROM rms_lexical_ngrams AS g JOIN docs USING (node_id) JOIN q USING (ngram)
        GROUP BY g.node_id
    )
    SELECT s.node_id, s.n / sqrt(qn.n * d.n_ngrams) AS similarity
    FROM shared AS s JOIN docs AS d USING (node_id), qn;
COMMENT ON MACRO TABLE rms_ngram_similarity IS 'rms_ngram_similarity(query, namespace := NULL): node_id, trigram-set cosine in [0, 1]';

-- rms_checked_embedding: the query embedding as FLOAT[], or an error naming it when it has no
-- direction (empty, all zeros, or a NULL, NaN or infinite component): its cosine with any
-- node is NaN, and NaN compares greater than every score
CREATE OR REPLACE MACRO rms_checked_embedding(query_embedding) AS
    CASE WHEN query_embedding IS NULL THEN NULL
         WHEN len(query_embedding) = 0
              OR list_bool_or(list_transform(CAST(query_embedding AS DOUBLE[]),
                                             lambda x: x IS NULL OR NOT isfinite(x)))
              OR list_sum(list_transform(CAST(query_embedding AS DOUBLE[]),
                                         lambda x: x * x)) = 0
         THEN error('rms_candidates: query_embedding must be a non-empty list of finite '
                    || 'numbers, not all 0, got ' || left(CAST(query_embedding AS VARCHAR), 80)
                    || '; pass the query''s embedding from the model that embedded '
                    || 'rms_nodes.embedding, or NULL to rank without the VECTOR path')
         ELSE CAST(query_embedding AS FLOAT[]) END;
COMMENT ON MACRO rms_checked_embedding IS 'rms_checked_embedding(query_embedding): FLOAT[]; an error when it is empty, all zeros or holds NULL, NaN or infinity';

-- rms_vector_similarity: the VECTOR path, cosine between rms_nodes.embedding and the query's;
-- a node whose stored embedding has no direction (all zeros, NaN) has no cosine, so no path
CREATE OR REPLACE MACRO rms_vector_similarity(query_embedding, namespace := NULL) AS TABLE
    SELECT node_id, similarity
    FROM (
        SELECT n.id AS node_id,
               CASE WHEN len(n.embedding) <> len(q.e)
                    THEN error('rms_candidates: query_embedding has ' || len(q.e)
                               || ' dimensions but the embedding of node '
                               || CAST(n.id AS VARCHAR) || ' has ' || len(n.embedding)
                               || '; embed the query with the model that embedded the nodes')
                    ELSE list_cosine_similarity(n.embedding, q.e) END AS similarity
        FROM rms_nodes AS n, (SELECT rms_checked_embedding(query_embedding) AS e) AS q
        WHERE q.e IS NOT NULL AND n.embedding IS NOT NULL
          AND (namespace IS NULL OR n.namespace_id = namespace)
          AND rms_retrievable(n.lifecycle_state)
    )
    WHERE NOT isnan(similarity);
COMMENT ON MACRO TABLE rms_vector_similarity IS 'rms_vector_similarity(query_embedding, namespace := NULL): node_id, cosine with rms_nodes.embedding (nodes whose embedding has no direction left out)';

-- rms_ranking_args: true, or an error naming k or ngram_min when it is out of range
CREATE OR REPLACE MACRO rms_ranking_args(k, ngram_min) AS
    -- typeof: a BOOLEAN casts to 1 or 0, and true is not a number of candidates.
    CASE WHEN typeof(k) = 'BOOLEAN'
              OR TRY_CAST(k AS DOUBLE) IS NULL OR NOT isfinite(TRY_CAST(k AS DOUBLE))
              OR TRY_CAST(k AS DOUBLE) < 0
              OR TRY_CAST(k AS DOUBLE) <> floor(TRY_CAST(k AS DOUBLE))
              OR TRY_CAST(k AS DOUBLE) > 4611686018427387904
         THEN error('rms_candidates: k must be a whole number >= 0, got '
                    || coalesce(CAST(k AS VARCHAR), 'NULL') || '; pass for example k := 50')
         WHEN TRY_CAST(ngram_min AS DOUBLE) IS NULL
              OR NOT isfinite(TRY_CAST(ngram_min AS DOUBLE))
              OR TRY_CAST(ngram_min AS DOUBLE) < 0 OR TRY_CAST(ngram_min AS DOUBLE) > 1
         THEN error('rms_candidates: ngram_min must be a number in [0, 1], got '
                    || coalesce(CAST(ngram_min AS VARCHAR), 'NULL')
                    || '; pass for example ngram_min := 0.2 (0 lets any shared trigram count, '
                    || '1 only identical trigram sets)')
         ELSE true END;
COMMENT ON MACRO rms_ranking_args IS 'rms_ranking_args(k, ngram_min): true; an error when k is not a whole number >= 0 or ngram_min is not in [0, 1]';

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

-- rms_named_speakers: the namespace's speakers whose name (every word of it) the query uses
CREATE OR REPLACE MACRO rms_named_speakers(query, namespace := NULL) AS TABLE
    SELECT speaker
    FROM (SELECT DISTINCT speaker FROM rms_nodes
          WHERE speaker IS NOT NULL AND (namespace IS NULL OR namespace_id = namespace))
    WHERE len(rms_split_terms(speaker)) > 0
      AND list_has_all(rms_split_terms(query), rms_split_terms(speaker));
COMMENT ON MACRO TABLE rms_named_speakers IS 'rms_named_speakers(query, namespace := NULL): speaker, each speaker the query names';

-- rms_month_window: the month a query names ("in March 2024", "in May"), or NULL. "may" is
-- the month only after a preposition or before a year or day: "May I ask ..." named May,
-- and the TIME cue lifted every node dated in May for a question about no time at all.
CREATE OR REPLACE MACRO rms_month_window(query) AS (
    WITH m AS MATERIALIZED (
        SELECT regexp_extract(lower(query),
            '\b(?:(january|february|march|april|june|july|august|september|october|november|december)'
            || '|(?:in|on|of|since|until|till|during|by|last|next|this|early|mid|late|before'
            || '|after|from|to|through|around|throughout|and|or)\s+(may)'
            || '|(may),?\s+(\d{4})|(may)\s+\d{1,2}(?:st|nd|rd|th)?)\b(?:,?\s+(\d{4}))?',
            ['month', 'after_word', 'before_year', 'its_year', 'before_day', 'year']) AS g
    ),
    named AS MATERIALIZED (
        SELECT coalesce(nullif(g.month, ''), nullif(g.after_word, ''),
                        nullif(g.before_year, ''), nullif(g.before_day, '')) AS month,
               coalesce(nullif(g.year, ''), nullif(g.its_year, '')) AS year
        FROM m
    )
    SELECT CASE WHEN month IS NULL THEN NULL
                ELSE {'month': list_position(['january', 'february', 'march', 'april', 'may',
                                              'june', 'july', 'august', 'september',
                                              'october', 'november', 'december'], month),
                      'year': TRY_CAST(year AS INTEGER)} END
    FROM named
);
COMMENT ON MACRO rms_month_window IS 'rms_month_window(query): STRUCT(month, year) the query names (year NULL when absent), else NULL';

-- rms_specificity: per node, how many of its stems are rare in the namespace (document
-- frequency <= rare_df), as a share of 3 capped at 1: turns that name things, not small talk
CREATE OR REPLACE MACRO rms_specificity(namespace := NULL, rare_df := 2) AS TABLE
    WITH scope AS MATERIALIZED (
        SELECT t.node_id, t.term
        FROM rms_lexical_terms AS t JOIN rms_nodes AS n ON n.id = t.node_id
        WHERE (namespace IS NULL OR n.namespace_id = namespace)
          AND rms_retrievable(n.lifecycle_state)
    ),
    df AS MATERIALIZED (SELECT term, count(*) AS n FROM scope GROUP BY term),
    arg AS MATERIALIZED (
        SELECT rms_count_arg(rare_df, 'rms_specificity', 'rare_df', '2') AS rare_df)
    SELECT node_id, least(1.0, count(*) FILTER (WHERE df.n <= arg.rare_df) / 3.0)
               AS specificity
    FROM scope JOIN df USING (term), arg GROUP BY node_id;
COMMENT ON MACRO TABLE rms_specificity IS 'rms_specificity(namespace := NULL, rare_df := 2): node_id, specificity in [0, 1] (share of 3 rare stems)';

-- rms_ranking_cues: validated settings of the cues added to the composite score, defaults
-- filled in (see docs: speaker, time, specificity boosts; session neighbours; feedback)
CREATE OR REPLACE MACRO rms_ranking_cues(cues) AS (
    -- Read as JSON as rms_ranking_weights is, so a misspelt cue is an error.
    WITH given AS MATERIALIZED (
        SELECT CASE WHEN cues IS NULL THEN CAST('{}' AS JSON)
                    -- TRY_CAST: malformed JSON text fails in the cast naming no argument
                    WHEN TRY_CAST(cues AS JSON) IS NULL
                    THEN error('ranking cues must be a STRUCT, MAP or JSON object such as '
                               || '{''speaker'': 0}, got ' || CAST(cues AS VARCHAR)
                               || ' (not valid JSON)')
                    ELSE TRY_CAST(cues AS JSON) END AS j
    ),
    raw AS MATERIALIZED (
        SELECT rms_json_number(j, 'speaker', 0.3, 'ranking cues') AS speaker,
               rms_json_number(j, 'time', 0.5, 'ranking cues') AS "time",
               rms_json_number(j, 'specificity', 0.25, 'ranking cues') AS specificity,
               rms_json_number(j, 'neighbours', 2, 'ranking cues') AS neighbours,
               rms_json_number(j, 'neighbour_decay', 0.8, 'ranking cues') AS neighbour_decay,
               rms_json_number(j, 'neighbour_seeds', 30, 'ranking cues') AS neighbour_seeds,
               rms_json_number(j, 'feedback_docs', 5, 'ranking cues') AS feedback_docs,
               rms_json_number(j, 'feedback_terms', 10, 'ranking cues') AS feedback_terms,
               rms_json_number(j, 'feedback_weight', 0.5, 'ranking cues') AS feedback_weight,
               list_filter(rms_json_object_keys(j, 'ranking cues', '{''speaker'': 0}'),
                           lambda x: x NOT IN (
                               'speaker', 'time', 'specificity', 'neighbours', 'neighbour_decay',
                               'neighbour_seeds', 'feedback_docs', 'feedback_terms',
                               'feedback_weight')) AS unknown
        FROM given
    ),
    checked AS MATERIALIZED (
        SELECT CASE
            WHEN len(unknown) > 0
            THEN error('ranking cues: unknown field(s) ' || array_to_string(unknown, ', ')
                       || '; fields: speaker, time, specificity, neighbours, '
                       || 'neighbour_decay, neighbour_seeds, feedback_docs, feedback_terms, '
                       || 'feedback_weight')
            WHEN NOT (least(speaker, "time", specificity, neighbour_decay, feedback_weight) >= 0
                      AND greatest(speaker, "time", specificity, neighbour_decay,
                                   feedback_weight) <= 1
                      AND least(neighbours, neighbour_seeds, feedback_docs, feedback_terms) >= 0
                      AND greatest(neighbours, neighbour_seeds, feedback_docs,
                                   feedback_terms) <= 2147483647
                      AND neighbours = floor(neighbours)
                      AND neighbour_seeds = floor(neighbour_seeds)
                      AND feedback_docs = floor(feedback_docs)
                      AND feedback_terms = floor(feedback_terms))
            THEN error('ranking cues out of range, got '
                       || CAST(to_json({'speaker': speaker, 'time': "time",
                                        'specificity': specificity, 'neighbours': neighbours,
                                        'neighbour_decay': neighbour_decay,
                                        'neighbour_seeds': neighbour_seeds,
                                        'feedback_docs': feedback_docs,
                                        'feedback_terms': feedback_terms,
                                        'feedback_weight': feedback_weight}) AS VARCHAR)
                       || '; speaker, time, specificity, neighbour_decay, feedback_weight must be '
                       || 'in [0, 1] and neighbours, neighbour_seeds, feedback_docs, '
                       || 'feedback_terms whole numbers >= 0 (0 turns a cue off)')
            ELSE true END AS ok, *
        FROM raw
    )
    SELECT CASE WHEN ok THEN {'speaker': speaker, 'time': "time", 'specificity': specificity,
                              'neighbours': CAST(neighbours AS INTEGER),
                              'neighbour_decay': neighbour_decay,
                              'neighbour_seeds': CAST(neighbour_seeds AS INTEGER),
                              'feedback_docs': CAST(feedback_docs AS INTEGER),
                              'feedback_terms': CAST(feedback_terms AS INTEGER),
                              'feedback_weight': feedback_weight} END
    FROM checked
);
COMMENT ON MACRO rms_ranking_cues IS 'rms_ranking_cues(cues): checked cue settings (speaker, time, specificity, neighbours, neighbour_decay, neighbour_seeds, feedback_docs, feedback_terms, feedback_weight)';

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
CREATE OR REPLACE MACRO rms_index_guard(stale_ok := false, k := 50, ngram_min := 0.2,
                                         query_embedding := NULL) AS TABLE
    -- The argument checks run here too: this one row is computed even when nothing matches.
    SELECT CASE WHEN NOT rms_ranking_args(k, ngram_min)
                     OR (query_embedding IS NOT NULL
                         AND rms_checked_embedding(query_embedding) IS NULL) THEN false
                WHEN (missing > 0 OR stale > 0) AND NOT stale_ok
                THEN error('rms_candidates: the lexical index is out of date (' || missing
                           || ' of ' || (indexed + missing + stale) || ' nodes not indexed, '
                           || stale || ' changed since); run rms_duck.refresh_index(con) '
                           || '(rms_duck.pack() does it for you on a writable connection), '
                           || 'or pass stale_ok := true to rank on the index as it is')
                ELSE true END AS ok
    FROM rms_lexical_index_status();
COMMENT ON MACRO TABLE rms_index_guard IS 'rms_index_guard(stale_ok := false, k := 50, ngram_min := 0.2, query_embedding := NULL): one row, ok = true; an error when the lexical index is out of date or an argument is out of range';

-- rms_candidate_scores: the merge, one row per node with its paths, signals and score.
-- The composite (lexical with feedback, ngram, vector, salience) is lifted by the cues:
-- session neighbours of the best hits inherit a decayed share of their score; nodes whose
-- speaker the query names, nodes in the month it names, and specific nodes get a boost;
-- the sum is scaled back into [0, 1].
CREATE OR REPLACE MACRO rms_candidate_scores(query, namespace := NULL, k := 50,
                                                  query_embedding := NULL, weights := NULL,
                                                  ngram_min := 0.2, cues := NULL,
                                            stale_ok := false) AS TABLE
    WITH w AS MATERIALIZED (
        SELECT rms_ranking_weights(weights, query_embedding IS NOT NULL) AS w,
               rms_ranking_cues(cues) AS c
    ),
    expansion AS MATERIALIZED (
        SELECT node_id, bm25
        FROM rms_bm25_terms((SELECT coalesce(list({'term': term, 'weight': weight}), [])
                             FROM rms_feedback_terms(query, namespace,
                                                     (SELECT c.feedback_docs FROM w),
                                                     (SELECT c.feedback_terms FROM w))),
                            namespace)
        WHERE (SELECT c.feedback_docs FROM w) > 0 AND bm25 > 0
    ),
    lex0 AS MATERIALIZED (SELECT node_id, bm25 FROM rms_bm25(query, namespace) WHERE bm25 > 0),
    lex_parts AS MATERIALIZED (
        SELECT node_id, bm25 / max(bm25) OVER () AS s, 'LEXICAL' AS path FROM lex0
        UNION ALL
        SELECT node_id, (SELECT c.feedback_weight FROM w) * bm25 / max(bm25) OVER (),
               'FEEDBACK' FROM expansion
    ),
    lex AS MATERIALIZED (
        SELECT node_id, least(1.0, sum(s ORDER BY s)) AS signal,
               -- FEEDBACK names the nodes only the expanded query found
               CASE WHEN list_contains(list(path), 'LEXICAL') THEN 'LEXICAL'
                    ELSE 'FEEDBACK' END AS via,
               row_number() OVER (ORDER BY sum(s ORDER BY s) DESC, node_id) AS rnk
        FROM lex_parts GROUP BY node_id
    ),
    ngr AS MATERIALIZED (
        SELECT node_id, similarity AS signal,
               row_number() OVER (ORDER BY similarity DESC, node_id) AS rnk
        FROM rms_ngram_similarity(query, namespace)
    ),
    vec AS MATERIALIZED (
        SELECT node_id, greatest(similarity, 0) AS signal,
               row_number() OVER (ORDER BY similarity DESC, node_id) AS rnk
        FROM rms_vector_similarity(query_embedding, namespace)
    ),
    named AS MATERIALIZED (
        SELECT speaker FROM rms_named_speakers(query, namespace)
        WHERE (SELECT c.speaker FROM w) > 0
    ),
    span AS MATERIALIZED (SELECT rms_month_window(query) AS m WHERE (SELECT c."time" FROM w) > 0),
    cued AS MATERIALIZED (
        SELECT n.id AS node_id,
               coalesce(n.speaker IN (SELECT speaker FROM named), false) AS by_speaker,
               -- The month in UTC, as the context prints it: month() of a TIMESTAMPTZ
               -- reads the session TimeZone (a plain client's is the host's).
               coalesce(month(timezone('UTC', n.event_time)) = span.m.month
                        AND (span.m.year IS NULL
                             OR year(timezone('UTC', n.event_time)) = span.m.year),
                        false) AS in_span
        FROM rms_nodes AS n LEFT JOIN span ON true
        WHERE (namespace IS NULL OR n.namespace_id = namespace)
          AND rms_retrievable(n.lifecycle_state)
          AND (n.speaker IN (SELECT speaker FROM named) OR span.m IS NOT NULL)
    ),
    hits AS MATERIALIZED (
        SELECT node_id, via AS path FROM lex WHERE rnk <= k
        UNION ALL
        SELECT node_id, 'NGRAM' AS path FROM ngr WHERE rnk <= k AND signal >= ngram_min
        UNION ALL
        SELECT node_id, 'VECTOR' AS path FROM vec WHERE rnk <= k AND signal > 0
        UNION ALL
        SELECT node_id, 'SPEAKER' AS path FROM cued WHERE by_speaker
        UNION ALL
        SELECT node_id, 'TIME' AS path FROM cued WHERE in_span
        UNION ALL
        SELECT node_id, path FROM rms_pinned_and_tasks(namespace)
    ),
    spec AS MATERIALIZED (
        SELECT node_id, specificity
        FROM rms_specificity(namespace) WHERE (SELECT c.specificity FROM w) > 0
    ),
    base AS MATERIALIZED (
        SELECT h.node_id, n.session_id, n.session_position, n.namespace_id,
               coalesce(lex.signal, 0) AS lexical, coalesce(ngr.signal, 0) AS ngram,
               coalesce(vec.signal, 0) AS vector, n.salience,
               least(1.0, greatest(0.0,
                   struct_extract(w.w, 'lexical') * coalesce(lex.signal, 0)
                   + struct_extract(w.w, 'ngram') * coalesce(ngr.signal, 0)
                   + struct_extract(w.w, 'vector') * coalesce(vec.signal, 0)
                   + struct_extract(w.w, 'salience') * n.salience)) AS composite,
               lex.node_id IS NOT NULL OR ngr.node_id IS NOT NULL
                   OR vec.node_id IS NOT NULL AS matched
        FROM (SELECT DISTINCT node_id FROM hits) AS h JOIN rms_nodes AS n ON n.id = h.node_id
        LEFT JOIN lex USING (node_id) LEFT JOIN ngr USING (node_id)
        LEFT JOIN vec USING (node_id), w
    ),
    seeds AS MATERIALIZED (
        SELECT * FROM base WHERE matched AND session_id IS NOT NULL
        ORDER BY composite DESC, node_id LIMIT (SELECT c.neighbour_seeds FROM w)
    ),
    near AS MATERIALIZED (
        SELECT n.id AS node_id, max(s.composite) * (SELECT c.neighbour_decay FROM w) AS inherited
        FROM seeds AS s JOIN rms_nodes AS n
             ON n.session_id = s.session_id AND n.namespace_id IS NOT DISTINCT FROM s.namespace_id
            AND n.id <> s.node_id
            AND abs(n.session_position - s.session_position) <= (SELECT c.neighbours FROM w)
        WHERE (SELECT c.neighbours FROM w) > 0 AND rms_retrievable(n.lifecycle_state)
        GROUP BY n.id
    ),
    paths AS MATERIALIZED (
        SELECT node_id, list_sort(list_distinct(list(path))) AS paths
        FROM (SELECT node_id, path FROM hits
              UNION ALL SELECT node_id, 'SESSION_CONTEXT' FROM near)
        GROUP BY node_id
    ),
    scored AS MATERIALIZED (
        SELECT p.node_id, p.paths,
               -- Independent retrievers: the words (LEXICAL, with its FEEDBACK and NGRAM
               -- variants) and the user's VECTOR, plus PINNED/ACTIVE_TASK. The packer takes
               -- path_count >= 2 first; the score already fuses every signal, so counting
               -- variants of one retriever, the SPEAKER and TIME cues or SESSION_CONTEXT
               -- (a share of a hit's score) put weak candidates ahead of strong ones (hard
               -- set, all evidence packed at 2K/4K: 78.4/86.9% with every path counted,
               -- 87.0/96.9% with retrievers; docs/ranking.md).
               len(list_distinct(list_transform(
                   list_filter(p.paths, lambda x: x NOT IN ('SPEAKER', 'TIME', 'SESSION_CONTEXT')),
                   lambda x: CASE WHEN x IN ('LEXICAL', 'FEEDBACK', 'NGRAM') THEN 'LEXICAL'
                                  ELSE x END))) AS path_count,
               coalesce(b.lexical, 0) AS lexical, coalesce(b.ngram, 0) AS ngram,
               coalesce(b.vector, 0) AS vector, n.salience,
               least(1.0, greatest(0.0,
                   (greatest(coalesce(b.composite,
                                      struct_extract(w.w, 'salience') * n.salience),
                             coalesce(near.inherited, 0))
                    + w.c.speaker * coalesce(cued.by_speaker, false)::INTEGER
                    + w.c."time" * coalesce(cued.in_span, false)::INTEGER
                    + w.c.specificity * coalesce(spec.specificity, 0))
                   / (1 + w.c.speaker + w.c."time" + w.c.specificity))) AS score,
               n.created_at,
               list_contains(p.paths, 'PINNED') OR list_contains(p.paths, 'ACTIVE_TASK') AS kept
        FROM paths AS p JOIN rms_nodes AS n ON n.id = p.node_id
        LEFT JOIN base AS b USING (node_id) LEFT JOIN near USING (node_id)
        LEFT JOIN cued USING (node_id) LEFT JOIN spec USING (node_id), w
    )
    SELECT node_id, score, paths, greatest(path_count, 1) AS path_count, lexical, ngram,
           vector, salience
    -- The guard's one row is computed even when no node matches, so its argument checks
    -- always run (stale_ok: the index itself is rms_candidates' guard to check).
    FROM rms_index_guard(true, k, ngram_min, query_embedding) AS g, scored
    WHERE g.ok
    ORDER BY kept DESC, score DESC, created_at DESC, node_id
    -- A bad k gets LIMIT 1, not a binder error nor a LIMIT 0 that DuckDB would answer
    -- without running the guard; the guard then names it.
    LIMIT CASE WHEN TRY_CAST(k AS DOUBLE) BETWEEN 0 AND 4611686018427387904
               THEN CAST(TRY_CAST(k AS DOUBLE) AS BIGINT) ELSE 1 END;
COMMENT ON MACRO TABLE rms_candidate_scores IS 'rms_candidate_scores(query, namespace, k, query_embedding, weights, ngram_min, cues): per node paths, signals and score with the ranking cues';

-- rms_candidates: ranked candidates with exactly the columns pack_context() reads
CREATE OR REPLACE MACRO rms_candidates(query, namespace := NULL, k := 50,
                                            query_embedding := NULL, weights := NULL,
                                            ngram_min := 0.2, cues := NULL,
                                            stale_ok := false) AS TABLE
    SELECT CAST(n.id AS VARCHAR) AS id, s.score, n.content, n.type, s.paths,
           CAST(s.path_count AS INTEGER) AS path_count, n.salience, n.pinned, n.confidence,
           n.epistemic_type, n.source_type, n.lifecycle_state, n.namespace_id, n.event_time,
           n.valid_from, n.valid_to, CAST(n.superseded_by AS VARCHAR) AS superseded_by,
           n.speaker, CAST(n.evidence_ids AS VARCHAR[]) AS evidence_ids,
           CAST(n.structured_value AS VARCHAR) AS structured_value, n.prose,
           -- Sorted: list() keeps whatever order the scan's threads produced, and the
           -- stored inputs (so a receipt's inputs_sha256) keep the order they are given.
           coalesce((
               SELECT list_sort(list(DISTINCT CAST(CASE WHEN e.source_id = n.id THEN e.target_id
                                                        ELSE e.source_id END AS VARCHAR)))
               FROM rms_edges AS e
               WHERE e.kind = 'CONTRADICTS' AND (e.source_id = n.id OR e.target_id = n.id)
           ), CAST([] AS VARCHAR[])) AS contradicts,
           n.session_id, n.session_position, n.condition_state, n.token_cost_estimate
    FROM rms_index_guard(stale_ok, k, ngram_min, query_embedding) AS g,
         rms_candidate_scores(query, namespace, k, query_embedding, weights, ngram_min, cues) AS s
    JOIN rms_nodes AS n ON n.id = s.node_id
    WHERE g.ok
    ORDER BY s.score DESC, n.created_at DESC, n.id;
COMMENT ON MACRO TABLE rms_candidates IS 'rms_candidates(query, namespace := NULL, k := 50, query_embedding := NULL, weights := NULL, ngram_min := 0.2, cues := NULL, stale_ok := false): ranked rows for pack_context(list(c), budget); an error when the lexical index is stale';

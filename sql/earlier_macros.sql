-- Macros as rms_duck stored them until 2026-12-04 (sql/ranking.sql then), before argument
-- checks were added. A file made earlier keeps them until a writable connect() re-creates
-- the persistent macros; verification accepts them as shipped meanwhile (duck/shipped.py).
-- Never run against a user's database: only in a scratch in-memory one, to fingerprint them.

CREATE OR REPLACE MACRO rms_ranking_weights(weights, has_vector) AS (
    -- Read as JSON (a STRUCT, MAP or JSON text alike), not through a STRUCT cast: a cast
    -- drops a misspelt field without a word (or fails in the binder, naming no field).
    WITH given AS MATERIALIZED (
        SELECT CASE WHEN weights IS NULL
                    THEN CAST('{"lexical": 0.45, "ngram": 0.25, "vector": 0.2, "salience": 0.1}'
                              AS JSON)
                    ELSE CAST(weights AS JSON) END AS j
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

CREATE OR REPLACE MACRO rms_bm25_terms(terms, namespace := NULL, k1 := 1.2, b := 0.75) AS TABLE
    WITH params AS MATERIALIZED (SELECT CAST(k1 AS DOUBLE) AS k1, CAST(b AS DOUBLE) AS b),
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

CREATE OR REPLACE MACRO rms_bm25(query, namespace := NULL, k1 := 1.2, b := 0.75) AS TABLE
    WITH params AS MATERIALIZED (SELECT CAST(k1 AS DOUBLE) AS k1, CAST(b AS DOUBLE) AS b),
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

CREATE OR REPLACE MACRO rms_month_window(query) AS (
    WITH m AS MATERIALIZED (
        SELECT regexp_extract(lower(query),
            '\b(january|february|march|april|may|june|july|august|september|october|november|december)\b(?:,?\s+(\d{4}))?',
            ['month', 'year']) AS g
    )
    SELECT CASE WHEN g.month = '' THEN NULL
                ELSE {'month': list_position(['january', 'february', 'march', 'april', 'may',
                                              'june', 'july', 'august', 'september',
                                              'october', 'november', 'december'], g.month),
                      'year': TRY_CAST(nullif(g.year, '') AS INTEGER)} END
    FROM m
);

CREATE OR REPLACE MACRO rms_ranking_cues(cues) AS (
    -- Read as JSON as rms_ranking_weights is, so a misspelt cue is an error.
    WITH given AS MATERIALIZED (
        SELECT CASE WHEN cues IS NULL THEN CAST('{}' AS JSON) ELSE CAST(cues AS JSON) END AS j
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

-- Until the release after that one (also 2026-12-04), these took docs, terms and rare_df
-- unchecked.
CREATE OR REPLACE MACRO rms_feedback_terms(query, namespace := NULL, docs := 5, terms := 10) AS TABLE
    WITH first AS MATERIALIZED (
        SELECT node_id, bm25 FROM rms_bm25(query, namespace)
        ORDER BY bm25 DESC, node_id LIMIT docs
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
    FROM weighted ORDER BY w DESC, term LIMIT terms;

CREATE OR REPLACE MACRO rms_specificity(namespace := NULL, rare_df := 2) AS TABLE
    WITH scope AS MATERIALIZED (
        SELECT t.node_id, t.term
        FROM rms_lexical_terms AS t JOIN rms_nodes AS n ON n.id = t.node_id
        WHERE (namespace IS NULL OR n.namespace_id = namespace)
          AND rms_retrievable(n.lifecycle_state)
    ),
    df AS MATERIALIZED (SELECT term, count(*) AS n FROM scope GROUP BY term)
    SELECT node_id, least(1.0, count(*) FILTER (WHERE df.n <= rare_df) / 3.0) AS specificity
    FROM scope JOIN df USING (term) GROUP BY node_id;

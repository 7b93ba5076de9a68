-- Bring the lexical index (rms_lexical_docs, _terms, _ngrams) up to date with rms_nodes.
-- Incremental: nodes deleted or edited since the last run are dropped and re-indexed, new
-- nodes are added, the rest is left alone. rms_duck.duck.ranking.refresh_index(con) runs this in
-- one transaction, after the ranking macros (rms_split_terms, rms_word_ngrams) are registered.

-- rms_refresh_stale: indexed nodes that are gone or whose content changed
CREATE OR REPLACE TEMP TABLE rms_refresh_stale AS
SELECT d.node_id
FROM rms_lexical_docs AS d LEFT JOIN rms_nodes AS n ON n.id = d.node_id
WHERE n.id IS NULL OR md5(n.content) <> d.content_md5;

DELETE FROM rms_lexical_terms WHERE node_id IN (SELECT node_id FROM rms_refresh_stale);
DELETE FROM rms_lexical_ngrams WHERE node_id IN (SELECT node_id FROM rms_refresh_stale);
DELETE FROM rms_lexical_docs WHERE node_id IN (SELECT node_id FROM rms_refresh_stale);

-- rms_refresh_new: nodes not indexed yet, with their words
CREATE OR REPLACE TEMP TABLE rms_refresh_new AS
SELECT n.id AS node_id, md5(n.content) AS content_md5, rms_split_terms(n.content) AS words
FROM rms_nodes AS n
WHERE n.id NOT IN (SELECT node_id FROM rms_lexical_docs);

-- rms_refresh_words: their words, one row per occurrence, stopwords removed
CREATE OR REPLACE TEMP TABLE rms_refresh_words AS
SELECT node_id, term
FROM (SELECT node_id, unnest(words) AS term FROM rms_refresh_new)
WHERE term NOT IN (SELECT word FROM rms_stopwords);

INSERT INTO rms_lexical_terms (node_id, term, tf)
SELECT node_id, term, count(*) AS tf FROM rms_refresh_words GROUP BY node_id, term;

-- the trigrams of the same words, distinct per node
INSERT INTO rms_lexical_ngrams (node_id, ngram)
SELECT DISTINCT node_id, ngram
FROM (SELECT node_id, unnest(rms_word_ngrams(term)) AS ngram FROM rms_refresh_words);

INSERT INTO rms_lexical_docs (node_id, content_md5, n_terms, n_ngrams)
SELECT r.node_id, r.content_md5,
       (SELECT count(*) FROM rms_refresh_words AS w WHERE w.node_id = r.node_id),
       (SELECT count(*) FROM rms_lexical_ngrams AS g WHERE g.node_id = r.node_id)
FROM rms_refresh_new AS r;

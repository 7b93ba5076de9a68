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

-- rms_refresh_stems: each distinct new word and its Snowball stem in the index language
-- (one UDF call per distinct word, not per occurrence)
CREATE OR REPLACE TEMP TABLE rms_refresh_stems AS
SELECT word, rms_stem_udf(word, (SELECT first(language) FROM rms_lexical_config)) AS stem
FROM (SELECT DISTINCT term AS word FROM rms_refresh_words);

-- the vocabulary plain clients stem query words with (rms_stem in sql/ranking.sql)
INSERT INTO rms_lexical_stems (word, stem)
SELECT word, stem FROM rms_refresh_stems ON CONFLICT DO NOTHING;

-- BM25 postings hold stems, so "adopted" in a node meets "adopt" in a question
INSERT INTO rms_lexical_terms (node_id, term, tf)
SELECT w.node_id, s.stem AS term, count(*) AS tf
FROM rms_refresh_words AS w JOIN rms_refresh_stems AS s ON s.word = w.term
GROUP BY w.node_id, s.stem;

-- the trigrams of the same words (unstemmed: they catch what stems miss), distinct per node
INSERT INTO rms_lexical_ngrams (node_id, ngram)
SELECT DISTINCT node_id, ngram
FROM (SELECT node_id, unnest(rms_word_ngrams(term)) AS ngram FROM rms_refresh_words);

INSERT INTO rms_lexical_docs (node_id, content_md5, n_terms, n_ngrams)
SELECT r.node_id, r.content_md5,
       (SELECT count(*) FROM rms_refresh_words AS w WHERE w.node_id = r.node_id),
       (SELECT count(*) FROM rms_lexical_ngrams AS g WHERE g.node_id = r.node_id)
FROM rms_refresh_new AS r;

-- the index now holds stems in this language
UPDATE rms_lexical_config SET indexed_language = language;

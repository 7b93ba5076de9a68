-- Persistent stand-ins for rms_duck's Python-backed macros. A DuckDB client that never
-- imported rms_duck finds these and gets an error saying what to do; rms_duck.register(con)
-- creates TEMP macros of the same names (sql/python_macros.sql), which take precedence.
-- Each error is cast to the type the real macro returns: DuckDB folds an expression over an
-- untyped error() to NULL without raising it (pack_context(...).context was NULL, silently).

CREATE OR REPLACE MACRO pack_context(candidates, budget) AS
    CAST(error('pack_context() runs Python: call rms_duck.register(con) on this connection first')
         AS STRUCT(
           context VARCHAR, tokens_used INTEGER, context_budget INTEGER,
           included STRUCT(id VARCHAR, section VARCHAR, representation VARCHAR, tokens INTEGER,
                           ref VARCHAR, score DOUBLE, tier INTEGER, conflict BOOLEAN,
                           source_type VARCHAR, epistemic VARCHAR)[],
           excluded STRUCT(id VARCHAR, reason VARCHAR, score DOUBLE, tier INTEGER)[],
           conflicts VARCHAR[][], flags VARCHAR[], warnings VARCHAR[],
           context_references STRUCT(ref VARCHAR, id VARCHAR)[], context_guidance VARCHAR,
           context_sha256 VARCHAR, receipt VARCHAR)),
    (candidates, budget, config) AS
    CAST(error('pack_context() runs Python: call rms_duck.register(con) on this connection first')
         AS STRUCT(
           context VARCHAR, tokens_used INTEGER, context_budget INTEGER,
           included STRUCT(id VARCHAR, section VARCHAR, representation VARCHAR, tokens INTEGER,
                           ref VARCHAR, score DOUBLE, tier INTEGER, conflict BOOLEAN,
                           source_type VARCHAR, epistemic VARCHAR)[],
           excluded STRUCT(id VARCHAR, reason VARCHAR, score DOUBLE, tier INTEGER)[],
           conflicts VARCHAR[][], flags VARCHAR[], warnings VARCHAR[],
           context_references STRUCT(ref VARCHAR, id VARCHAR)[], context_guidance VARCHAR,
           context_sha256 VARCHAR, receipt VARCHAR));
COMMENT ON MACRO main.pack_context IS 'pack_context(candidates, budget [, config]): stand-in; call rms_duck.register(con) to pack';

CREATE OR REPLACE MACRO rms_token_count(text) AS
    CAST(error('rms_token_count() runs Python: call rms_duck.register(con) on this connection first') AS BIGINT),
    (text, encoding) AS
    CAST(error('rms_token_count() runs Python: call rms_duck.register(con) on this connection first') AS BIGINT);
COMMENT ON MACRO main.rms_token_count IS 'rms_token_count(text [, encoding]): stand-in; call rms_duck.register(con) to count';

CREATE OR REPLACE MACRO rms_token_estimate(text) AS
    CAST(error('rms_token_estimate() runs Python: call rms_duck.register(con) on this connection first') AS BIGINT),
    (text, ratio_or_encoding) AS
    CAST(error('rms_token_estimate() runs Python: call rms_duck.register(con) on this connection first') AS BIGINT);
COMMENT ON MACRO main.rms_token_estimate IS 'rms_token_estimate(text [, chars_per_token or encoding]): stand-in; call rms_duck.register(con)';

CREATE OR REPLACE MACRO rms_store(candidates, budget, config := NULL, namespace := NULL,
                                  session_id := NULL) AS
    CAST(error('rms_store() runs Python: call rms_duck.register(con) on this connection first') AS VARCHAR);
COMMENT ON MACRO main.rms_store IS 'rms_store(candidates, budget, ...): stand-in; call rms_duck.register(con) to store from SQL';

-- Every column of the real rms_replay(), each raising (a constant NULL column would let
-- DuckDB fold `WHERE NOT reproduced` to an empty result without raising), so a query
-- naming them binds and then says what to do.
CREATE OR REPLACE MACRO rms_replay(rid := NULL) AS TABLE
    WITH stand_in AS (
        SELECT 'rms_replay() runs Python: call rms_duck.register(con) on this connection '
               || 'first (rms_verify_receipts() needs no Python)' AS message
    )
    SELECT CAST(error(message) AS UUID) AS receipt_id, CAST(error(message) AS UUID) AS bundle_id,
           CAST(error(message) AS VARCHAR) AS chain_namespace,
           CAST(error(message) AS BIGINT) AS seq,
           CAST(error(message) AS VARCHAR) AS recorded_sha256,
           CAST(error(message) AS VARCHAR) AS replayed_sha256,
           CAST(error(message) AS BOOLEAN) AS identical,
           CAST(error(message) AS BOOLEAN) AS same_decisions,
           CAST(error(message) AS BOOLEAN) AS encoding_changed,
           CAST(error(message) AS VARCHAR[]) AS differing_fields,
           CAST(error(message) AS BOOLEAN) AS inputs_intact,
           CAST(error(message) AS VARCHAR[]) AS changed_nodes,
           CAST(error(message) AS VARCHAR) AS error,
           CAST(error(message) AS BOOLEAN) AS reproduced
    FROM stand_in
    WHERE CAST(error(message) AS BOOLEAN);
COMMENT ON MACRO TABLE main.rms_replay IS 'rms_replay(rid := NULL): stand-in; call rms_duck.register(con) to replay (rms_verify_receipts() needs no Python)';

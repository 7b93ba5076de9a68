-- Persistent stand-ins for rms_duck's Python-backed macros. A DuckDB client that never
-- imported rms_duck finds these and gets an error saying what to do; rms_duck.register(con)
-- creates TEMP macros of the same names (sql/python_macros.sql), which take precedence.

CREATE OR REPLACE MACRO pack_context(candidates, budget) AS
    error('pack_context() runs Python: call rms_duck.register(con) on this connection first'),
    (candidates, budget, config) AS
    error('pack_context() runs Python: call rms_duck.register(con) on this connection first');
COMMENT ON MACRO main.pack_context IS 'pack_context(candidates, budget [, config]): stand-in; call rms_duck.register(con) to pack';

CREATE OR REPLACE MACRO rms_token_count(text) AS
    error('rms_token_count() runs Python: call rms_duck.register(con) on this connection first'),
    (text, encoding) AS
    error('rms_token_count() runs Python: call rms_duck.register(con) on this connection first');
COMMENT ON MACRO main.rms_token_count IS 'rms_token_count(text [, encoding]): stand-in; call rms_duck.register(con) to count';

CREATE OR REPLACE MACRO rms_token_estimate(text) AS
    error('rms_token_estimate() runs Python: call rms_duck.register(con) on this connection first'),
    (text, ratio_or_encoding) AS
    error('rms_token_estimate() runs Python: call rms_duck.register(con) on this connection first');
COMMENT ON MACRO main.rms_token_estimate IS 'rms_token_estimate(text [, chars_per_token or encoding]): stand-in; call rms_duck.register(con)';

CREATE OR REPLACE MACRO rms_store(candidates, budget, config := NULL, namespace := NULL,
                                  session_id := NULL) AS
    error('rms_store() runs Python: call rms_duck.register(con) on this connection first');
COMMENT ON MACRO main.rms_store IS 'rms_store(candidates, budget, ...): stand-in; call rms_duck.register(con) to store from SQL';

CREATE OR REPLACE MACRO rms_replay(rid := NULL) AS TABLE
    SELECT error('rms_replay() runs Python: call rms_duck.register(con) on this connection '
                 || 'first (rms_verify_receipts() needs no Python)') AS error;
COMMENT ON MACRO TABLE main.rms_replay IS 'rms_replay(rid := NULL): stand-in; call rms_duck.register(con) to replay (rms_verify_receipts() needs no Python)';

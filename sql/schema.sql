-- rms_duck schema, version 1. Plain DuckDB (no UDFs), idempotent: safe to run again.
-- Every timestamp is TIMESTAMPTZ; rms_duck connections run with TimeZone = 'UTC'.

-- rms_schema_version: the schema versions applied to this database, for migrations
CREATE TABLE IF NOT EXISTS rms_schema_version (
    version     INTEGER PRIMARY KEY,
    applied_at  TIMESTAMPTZ NOT NULL DEFAULT current_timestamp
);

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
    token_cost_estimate INTEGER
);

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

-- rms_line_costs: exact token costs of rendered context lines, by encoding and line digest
CREATE TABLE IF NOT EXISTS rms_line_costs (
    encoding     VARCHAR NOT NULL,
    line_sha256  VARCHAR NOT NULL,
    n_tokens     INTEGER NOT NULL,
    PRIMARY KEY (encoding, line_sha256)
);

-- rms_candidate: the canonical candidate STRUCT that pack_context() casts its input to
CREATE TYPE IF NOT EXISTS rms_candidate AS STRUCT(
    id VARCHAR, score DOUBLE, content VARCHAR, type VARCHAR, paths VARCHAR[],
    path_count INTEGER, salience DOUBLE, pinned BOOLEAN, confidence DOUBLE,
    epistemic_type VARCHAR, source_type VARCHAR, lifecycle_state VARCHAR,
    namespace_id VARCHAR, event_time TIMESTAMPTZ, valid_from TIMESTAMPTZ,
    valid_to TIMESTAMPTZ, superseded_by VARCHAR, speaker VARCHAR, evidence_ids VARCHAR[],
    structured_value VARCHAR, prose VARCHAR, contradicts VARCHAR[], session_id VARCHAR,
    session_position INTEGER, condition_state VARCHAR, token_cost_estimate INTEGER
);

INSERT INTO rms_schema_version (version)
SELECT 1 WHERE NOT EXISTS (SELECT 1 FROM rms_schema_version WHERE version = 1);

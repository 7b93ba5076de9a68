"""The SQL and Arrow types of pack_context()'s result, defined once."""

from __future__ import annotations

import pyarrow as pa

BUNDLE_SQL_TYPE = (
    "STRUCT(context VARCHAR, tokens_used INTEGER, context_budget INTEGER, "
    "included STRUCT(id VARCHAR, section VARCHAR, representation VARCHAR, tokens INTEGER, "
    "ref VARCHAR, score DOUBLE, tier INTEGER, conflict BOOLEAN)[], "
    "excluded STRUCT(id VARCHAR, reason VARCHAR, score DOUBLE, tier INTEGER)[], "
    "conflicts VARCHAR[][], flags VARCHAR[], "
    "context_references STRUCT(ref VARCHAR, id VARCHAR)[], context_guidance VARCHAR, "
    "context_sha256 VARCHAR, receipt VARCHAR)"
)

BUNDLE_ARROW_TYPE = pa.struct([
    ("context", pa.string()),
    ("tokens_used", pa.int32()),
    ("context_budget", pa.int32()),
    ("included", pa.list_(pa.struct([
        ("id", pa.string()), ("section", pa.string()), ("representation", pa.string()),
        ("tokens", pa.int32()), ("ref", pa.string()), ("score", pa.float64()),
        ("tier", pa.int32()), ("conflict", pa.bool_()),
    ]))),
    ("excluded", pa.list_(pa.struct([
        ("id", pa.string()), ("reason", pa.string()), ("score", pa.float64()),
        ("tier", pa.int32()),
    ]))),
    ("conflicts", pa.list_(pa.list_(pa.string()))),
    ("flags", pa.list_(pa.string())),
    ("context_references", pa.list_(pa.struct([("ref", pa.string()), ("id", pa.string())]))),
    ("context_guidance", pa.string()),
    ("context_sha256", pa.string()),
    ("receipt", pa.string()),
])

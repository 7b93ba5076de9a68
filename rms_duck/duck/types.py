"""The shape of pack_context()'s result, defined once: Arrow type, SQL type and row."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from ..bundle import MemoryBundle

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
    ("warnings", pa.list_(pa.string())),
    ("context_references", pa.list_(pa.struct([("ref", pa.string()), ("id", pa.string())]))),
    ("context_guidance", pa.string()),
    ("context_sha256", pa.string()),
    ("receipt", pa.string()),
])

_SQL_NAMES = {pa.string(): "VARCHAR", pa.int32(): "INTEGER", pa.float64(): "DOUBLE",
              pa.bool_(): "BOOLEAN"}


def sql_type(arrow_type: pa.DataType) -> str:
    """The DuckDB spelling of an Arrow type built from strings, ints, doubles, lists, structs."""
    if pa.types.is_struct(arrow_type):
        fields = (arrow_type.field(i) for i in range(arrow_type.num_fields))
        return "STRUCT(" + ", ".join(f"{f.name} {sql_type(f.type)}" for f in fields) + ")"
    if pa.types.is_list(arrow_type):
        return sql_type(arrow_type.value_type) + "[]"
    return _SQL_NAMES[arrow_type]


BUNDLE_SQL_TYPE = sql_type(BUNDLE_ARROW_TYPE)


def bundle_row(bundle: MemoryBundle) -> dict[str, Any]:
    """The STRUCT pack_context() returns in SQL, as a Python dict of BUNDLE_ARROW_TYPE."""
    return {
        "context": bundle.context,
        "tokens_used": bundle.tokens_used,
        "context_budget": bundle.context_budget,
        "included": [
            {"id": r.id, "section": r.section.value, "representation": r.representation.value,
             "tokens": r.tokens, "ref": r.ref, "score": r.score, "tier": int(r.tier),
             "conflict": r.conflict}
            for r in bundle.included
        ],
        "excluded": [
            {"id": r.id, "reason": r.reason.value, "score": r.score,
             "tier": None if r.tier is None else int(r.tier)}
            for r in bundle.excluded
        ],
        "conflicts": [list(pair) for pair in bundle.conflicts],
        "flags": list(bundle.flags),
        "warnings": list(bundle.warnings),
        "context_references": [{"ref": k, "id": v} for k, v in bundle.context_references.items()],
        "context_guidance": bundle.context_guidance,
        "context_sha256": bundle.context_sha256,
        "receipt": bundle.receipt,
    }

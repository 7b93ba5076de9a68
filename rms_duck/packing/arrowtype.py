"""The Arrow type of one packed bundle (pack_context()'s STRUCT, field for field) and the
row that fills it.

Kept in the core so the batch API (batches.py) and the DuckDB adapter (duck/types.py,
which pairs it with the SQL spelling) share one definition. Imports pyarrow, so
packing/__init__ does not import this module.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
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
    ("context_references", pa.list_(pa.struct([("ref", pa.string()), ("id", pa.string())]))),
    ("context_guidance", pa.string()),
    ("context_sha256", pa.string()),
    ("receipt", pa.string()),
])

BUNDLE_FIELDS = tuple(field.name for field in BUNDLE_ARROW_TYPE)

# The optional column pack_batches(inputs=True) adds: the validated candidates as canonical
# JSON, which rms_bundles.inputs stores and replay re-packs.
INPUTS_FIELD = pa.field("inputs", pa.string())


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
        "context_references": [{"ref": k, "id": v} for k, v in bundle.context_references.items()],
        "context_guidance": bundle.context_guidance,
        "context_sha256": bundle.context_sha256,
        "receipt": bundle.receipt,
    }

"""The Arrow type of one packed bundle (pack_context()'s STRUCT, field for field) and the
row that fills it.

Kept in the core so the batch API (batches.py) and the DuckDB adapter (duck/types.py,
which spells the same type in SQL) share one definition. The core imports no pyarrow at
module level, so the type is built on first use.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from ..bundle import MemoryBundle

# The bundle's fields, in order (a test holds this to bundle_arrow_type()).
BUNDLE_FIELDS = ("context", "tokens_used", "context_budget", "included", "excluded",
                 "conflicts", "flags", "warnings", "context_references", "context_guidance",
                 "context_sha256", "receipt")
# The column pack_batches(inputs=True) adds: the validated candidates as canonical JSON,
# which rms_bundles.inputs stores and replay re-packs.
INPUTS_COLUMN = "inputs"


@cache
def bundle_arrow_type() -> pa.StructType:
    """pack_context()'s STRUCT as an Arrow type."""
    import pyarrow as pa

    return pa.struct([
        ("context", pa.string()),
        ("tokens_used", pa.int32()),
        ("context_budget", pa.int32()),
        ("included", pa.list_(pa.struct([
            ("id", pa.string()), ("section", pa.string()), ("representation", pa.string()),
            ("tokens", pa.int32()), ("ref", pa.string()), ("score", pa.float64()),
            ("tier", pa.int32()), ("conflict", pa.bool_()), ("source_type", pa.string()),
            ("epistemic", pa.string()),
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


def inputs_field() -> pa.Field:
    import pyarrow as pa

    return pa.field(INPUTS_COLUMN, pa.string())


def bundle_row(bundle: MemoryBundle) -> dict[str, Any]:
    """The STRUCT pack_context() returns in SQL, as a Python dict of bundle_arrow_type()."""
    return bundle.to_row()

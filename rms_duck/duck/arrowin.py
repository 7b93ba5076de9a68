"""Candidates from any Arrow-capable table: pyarrow, pandas, polars, DuckDB relations.

Everything goes through one Arrow table, so each kind of input gives the same rows, and so
the same bundle, as passing the equivalent pyarrow Table.
"""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa

from ..columnar import plain_types
from ..errors import CandidateError


def arrow_table(data: Any) -> pa.Table:
    """`data` as a pyarrow Table (view types cast to plain ones), or a CandidateError that
    says what to pass instead."""
    return plain_types(_any_table(data))


def _any_table(data: Any) -> pa.Table:
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    to_arrow = getattr(data, "to_arrow_table", None)  # a DuckDB relation
    if callable(to_arrow) and type(data).__module__.startswith(("duckdb", "_duckdb")):
        return to_arrow()
    pandas = sys.modules.get("pandas")
    if pandas is not None and isinstance(data, pandas.DataFrame):
        # Not through __arrow_c_stream__, which keeps a named index as a column: the index
        # is never a candidate field, as in pack_batches() and SQL.
        return pa.Table.from_pandas(data, preserve_index=False)
    if hasattr(data, "__arrow_c_stream__"):  # polars, DuckDB, nanoarrow...
        return pa.table(data)
    raise CandidateError(
        f"candidates must be a ranking query string or an Arrow-capable table (pyarrow, "
        f"pandas, polars, a DuckDB relation, anything with __arrow_c_stream__), got "
        f"{type(data).__name__}; for Python rows pass pa.Table.from_pylist(rows) or call "
        "rms_duck.pack_candidates(rows, budget=...)")


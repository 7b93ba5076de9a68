"""Candidates from any Arrow-capable table: pyarrow, pandas, polars, DuckDB relations.

Everything goes through one Arrow table, so each kind of input gives the same rows, and so
the same bundle, as passing the equivalent pyarrow Table.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import duckdb
import pyarrow as pa

from ..errors import CandidateError
from ..packing.batches import as_table, lazy_frame_fix


def _stale_relation(exc: duckdb.InvalidInputException) -> Exception:
    """rms_candidates()'s stale-index error says rms_duck.pack() refreshes the index, which
    it does for query text only: a relation runs as it was built."""
    found = re.match(r"(.*the lexical index is out of date \([^)]*\))", str(exc))
    if found is None:
        return exc
    return duckdb.InvalidInputException(
        f"{found.group(1)}; rms_duck.pack() refreshes the index before query text, but a "
        "relation runs as it was built: pass the query text instead (rms_duck.pack(con, "
        "\"SELECT * FROM rms_candidates('...')\", budget=...)), run "
        "rms_duck.refresh_index(con) before building the relation, or pass stale_ok := true "
        "to rank on the index as it is")


def arrow_table(data: Any) -> pa.Table:
    """`data` as a pyarrow Table, read as pack_batches() reads it (packing.batches.as_table:
    no pandas index, plain text types), or a CandidateError that says what to pass instead."""
    check_arrow_kind(data)
    if isinstance(data, pa.RecordBatchReader):
        data = data.read_all()
    if _is_relation(data):
        try:
            data = data.to_arrow_table()
        except duckdb.InvalidInputException as exc:
            raise _stale_relation(exc) from None
    return as_table(data, candidates=())


def check_arrow_kind(data: Any) -> None:
    """A CandidateError that says what to pass instead, unless `data` is something
    arrow_table() reads; nothing is read here (pack() asks before its query-only checks,
    so a list of rows is told how to pass rows, not only that max_rows would be ignored)."""
    pandas = sys.modules.get("pandas")
    if isinstance(data, (pa.RecordBatchReader, pa.Table, pa.RecordBatch)) \
            or _is_relation(data) or hasattr(data, "__arrow_c_stream__") \
            or (pandas is not None and isinstance(data, pandas.DataFrame)):
        return
    lazy = lazy_frame_fix(data)
    if lazy is not None:
        raise CandidateError(f"candidates must be a ranking query string or an Arrow-capable "
                             f"table, got {lazy}")
    if isinstance(data, dict):
        fix = ("for a dict of columns pass pa.table(columns); for one record, "
               "pa.Table.from_pylist([record])")
    else:
        fix = ("for Python rows pass pa.Table.from_pylist(rows) or call "
               "rms_duck.pack_candidates(rows, budget=...)")
    raise CandidateError(
        f"candidates must be a ranking query string or an Arrow-capable table (pyarrow, "
        f"pandas, polars, a DuckDB relation, anything with __arrow_c_stream__), got "
        f"{type(data).__name__}; {fix}")


def _is_relation(data: Any) -> bool:
    """A DuckDB relation, which to_arrow_table() runs."""
    return callable(getattr(data, "to_arrow_table", None)) \
        and type(data).__module__.startswith(("duckdb", "_duckdb"))

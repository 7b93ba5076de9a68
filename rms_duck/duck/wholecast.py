"""Whole fields given to pack_context() or rms_store() as FLOAT or DOUBLE, checked before
DuckDB casts them to rms_candidate's BIGINT.

DuckDB's cast refuses NaN, infinity and a value outside BIGINT's range (INTEGER's, in a file
created before 2026-12-02) with an error naming no candidate and no field. Such a list gets
the error the Python entry points raise instead: the first one in row order, in the same
words a dict row or an Arrow table gets. A fractional value still passes, rounded as the
cast rounds it (docs/packing.md says why).
"""

from __future__ import annotations

import math
import re
from functools import cache
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ..candidates import INT32_MAX, INT32_MIN, to_candidates
from ..errors import RmsError
from ..packing.batches import in_group
from .sqlfiles import read_sql

WHOLE_FIELDS = ("path_count", "session_position", "token_cost_estimate")
# Stands in sql/python_macros.sql for wholes_as_double_type(), put there on install.
WHOLES_AS_DOUBLE = "rms_candidate_wholes_as_double"


@cache
def wholes_as_double_type() -> str:
    """rms_candidate as sql/schema.sql defines it, with DOUBLE whole fields: every field name,
    so the macro's cast to it binds for each list the cast to rms_candidate binds for."""
    found = re.search(r"CREATE TYPE IF NOT EXISTS rms_candidate AS (STRUCT\(.*?\));",
                      read_sql("schema.sql"), re.DOTALL)
    if found is None:
        raise RuntimeError("sql/schema.sql no longer defines rms_candidate")
    text = " ".join(found.group(1).split())
    for name in WHOLE_FIELDS:
        if f"{name} BIGINT" not in text:
            raise RuntimeError(f"rms_candidate's {name} is no longer BIGINT")
        text = text.replace(f"{name} BIGINT", f"{name} DOUBLE")
    return text


def check_whole_values(lists: pa.ChunkedArray) -> None:
    """Raise the Python entry points' first error for the lists up to the first one holding
    a whole value the cast would refuse (the checks refuse every such value); return when
    there is none, the usual case, without reading the lists into Python."""
    for chunk in lists.chunks:
        if len(chunk) == 0 or not _any_refused(chunk.flatten()):
            continue
        for rows in chunk.to_pylist():
            _round_as_cast(rows)
            try:
                to_candidates(rows or ())  # a NULL list packs as an empty one
            except RmsError as exc:
                raise in_group(exc, rows) from exc.__cause__


def _any_refused(structs: pa.StructArray) -> bool:
    for name in WHOLE_FIELDS:
        column = structs.field(name)
        if column.null_count == len(column):
            continue
        rounded = pc.round(column, round_mode="half_to_even")  # as DuckDB's cast rounds
        refused = pc.or_(pc.invert(pc.is_finite(column)),
                         pc.or_(pc.less(rounded, INT32_MIN), pc.greater(rounded, INT32_MAX)))
        if pc.any(refused).as_py():
            return True
    return False


def _round_as_cast(rows: list[dict[str, Any] | None] | None) -> None:
    """Round the finite whole values in place as the cast does (1.5 packs as 2, where the
    row checks refuse it); NaN and infinity stay for the checks to name."""
    for row in rows or ():
        if row is None:
            continue
        for name in WHOLE_FIELDS:
            value = row[name]
            if value is not None and math.isfinite(value):
                row[name] = round(value)

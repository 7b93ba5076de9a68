"""The floors under the SQL and stored targets: what a pack costs before any packing.

`bench_handover(candidates, budget)` is pack_context's own macro, read from
sql/python_macros.sql (the same argument checks and the same cast to rms_candidate[]), over
a UDF that returns a bundle made beforehand. Timed through the bench's query, it is
DuckDB's list aggregation, the cast, and the Arrow hand-over both ways, with no Python work
but returning: no UDF called through pack_context can take less.

`rms_bench_bare_udf(candidates, budget)` hands the same bundle back from the list as the
query builds it, with no macro and no cast: what DuckDB alone charges any Python UDF to
take the candidates and return a bundle, whatever checks a packer put around it.

`write_floor` is one INSERT of a stored pack's two large texts (its inputs and its receipt)
into a table without constraints or keys: what storing that pack writes, with none of the
chain's reads, checks and other statements around it.
"""

from __future__ import annotations

import re

import duckdb
import pyarrow as pa

from ..duck.sqlfiles import read_sql
from ..duck.types import BUNDLE_SQL_TYPE

HANDOVER_MACRO = "bench_handover"
BARE_UDF = "rms_bench_bare_udf"
_UDF = "rms_bench_handover_udf"
_PACK_MACRO = re.compile(r"CREATE OR REPLACE TEMP MACRO pack_context\(.*?\);\n", re.DOTALL)


def handover_macro_sql() -> str:
    """pack_context's macro from sql/python_macros.sql, renamed and over the stand-in UDF."""
    found = _PACK_MACRO.search(read_sql("python_macros.sql"))
    if found is None:
        raise RuntimeError("sql/python_macros.sql no longer defines pack_context as the "
                           "bench expects: update bench/handover.py")
    text = found.group(0)
    if text.count("rms_pack_udf(") != 2:
        raise RuntimeError("pack_context no longer calls rms_pack_udf in both overloads: "
                           "update bench/handover.py")
    return (text.replace("MACRO pack_context(", f"MACRO {HANDOVER_MACRO}(")
            .replace("rms_pack_udf(", f"{_UDF}("))


def install_handover(con: duckdb.DuckDBPyConnection) -> None:
    """Create bench_handover on `con`. Its first call packs for real (as pack_context
    would) and keeps the bundle; every later call returns that bundle unchanged, so time
    it from the second call on, over the same single candidate list."""
    from ..duck.udfs import pack_udf

    ready: list[pa.Array] = []

    def hand_back(candidates: pa.ChunkedArray, budgets: pa.ChunkedArray,
                  configs: pa.ChunkedArray) -> pa.Array:
        if not ready:
            ready.append(pack_udf(candidates, budgets, configs))
        if len(ready[0]) != len(candidates):
            raise ValueError(f"bench_handover holds {len(ready[0])} bundle(s) for "
                             f"{len(candidates)} candidate list(s)")
        return ready[0]

    con.create_function(_UDF, hand_back,  # type: ignore[call-overload]
                        ["rms_candidate[]", "BIGINT", "VARCHAR"], BUNDLE_SQL_TYPE,
                        type="arrow", null_handling="special")
    con.execute(handover_macro_sql())

    def hand_back_bare(candidates: pa.ChunkedArray, budgets: pa.ChunkedArray) -> pa.Array:
        if not ready or len(ready[0]) != len(candidates):
            raise ValueError(f"{BARE_UDF} hands back the bundle {HANDOVER_MACRO} made: call "
                             f"that first, over the same single candidate list")
        return ready[0]

    # No parameter types: DuckDB hands over the list as the query built it, uncast.
    con.create_function(BARE_UDF, hand_back_bare, None,  # type: ignore[call-overload]
                        BUNDLE_SQL_TYPE, type="arrow", null_handling="special")


WRITE_FLOOR_TABLE = "bench_write_floor"


def install_write_floor(con: duckdb.DuckDBPyConnection) -> None:
    # The stored columns' types: DuckDB checks a JSON value as it is inserted.
    con.execute(f"CREATE TEMP TABLE {WRITE_FLOOR_TABLE} (inputs JSON, receipt VARCHAR)")


def write_floor(con: duckdb.DuckDBPyConnection, inputs: str, receipt: str) -> None:
    """One INSERT of the two texts, bound as parameters as storing binds them."""
    con.execute(f"INSERT INTO {WRITE_FLOOR_TABLE} VALUES (?, ?)", [inputs, receipt])

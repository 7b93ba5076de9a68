"""The rows of a guarded ranking query, read with one bind of the query where that is safe.

DuckDB's `cur.sql(q).to_arrow_reader()` streams Arrow batches but binds `q` twice (once to
describe the relation, once to run it); for the ranking macros a bind is about 40 ms, a
fifth of an agent's pack call. `cur.execute(q)` binds once and `fetchmany` still streams,
so `max_rows` stops a runaway query as before, but it hands over Python values. Those are
the values the Arrow path would produce only for plain column types under the candidate
fields' own (lower-case) names, so only such results are read that way; any other result
(a UUID, DECIMAL or naive TIMESTAMP column, names in another case or twice) is read again
through Arrow, which checks it a column at a time with its usual errors.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import duckdb

from ..columnar import Row, intake
from ..records import Candidate

BATCH_ROWS = 10_000

# Types whose Python values (fetchmany) equal their Arrow values (to_pylist) exactly.
_PLAIN_TYPES = frozenset({
    "VARCHAR", "DOUBLE", "FLOAT", "BOOLEAN", "TINYINT", "SMALLINT", "INTEGER", "BIGINT",
    "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT", "TIMESTAMP WITH TIME ZONE", "VARCHAR[]",
})
_FIELDS = frozenset(Candidate.__slots__)


def query_batches(cur: duckdb.DuckDBPyConnection, sql: str,
                  params: Sequence[Any] | None) -> Iterator[list[Row]]:
    """The query's rows in batches of at most BATCH_ROWS: dicts (plain results) or what
    columnar.intake() makes of Arrow batches. Either way to_candidates() finishes them."""
    values = list(params or [])
    cur.execute(sql, values)
    if plain_result(cur.description or []):
        names = [column[0] for column in cur.description or []]
        while chunk := cur.fetchmany(BATCH_ROWS):
            yield [dict(zip(names, row, strict=True)) for row in chunk]
        return
    cur.abort()  # the pending result: the Arrow reader below runs the query afresh
    for batch in cur.sql(sql, params=values).to_arrow_reader(BATCH_ROWS):
        yield intake(batch)  # checked a column at a time, as for tables


def plain_result(description: Sequence[Sequence[Any]]) -> bool:
    """True when every column has a plain type and a distinct name, and every name that
    means a candidate field (in any case) is that field's own name."""
    seen: set[str] = set()
    for column in description:
        name, kind = column[0], str(column[1])
        folded = name.lower()
        if kind not in _PLAIN_TYPES or folded in seen or (folded in _FIELDS and name != folded):
            return False
        seen.add(folded)
    return True

"""A guarded ranking query is read with one bind when its columns are plain (duck/queryrows.py):
its rows then arrive as Python values, not Arrow batches. These tests hold that path to the
Arrow one: the same Candidates, the same first error, and the Arrow path itself for every
result whose Python values could differ."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rms_duck
from rms_duck.candidates import to_candidates
from rms_duck.columnar import intake
from rms_duck.duck import queryrows
from rms_duck.duck.queryrows import plain_result, query_batches
from rms_duck.errors import CandidateError, QueryLimitError

_CON = rms_duck.connect()
_CUR = _CON.cursor()

_texts = st.one_of(st.none(), st.text(max_size=8), st.sampled_from(["", "  ", "a", "b"]))
_floats = st.one_of(st.none(), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([0.0, 0.5, 1.0, -0.0]))
_lists = st.one_of(st.none(), st.lists(st.one_of(st.none(), st.text(max_size=4)), max_size=3))
_times = st.one_of(st.none(), st.datetimes(min_value=datetime(1, 1, 2),
                                           max_value=datetime(9999, 12, 30),
                                           timezones=st.just(UTC)))
COLUMNS = {  # field: (Arrow type, values); each an Arrow type DuckDB reads as a plain type
    "id": (pa.string(), st.one_of(_texts, st.sampled_from(["n1", "n2", "n3"]))),
    "score": (pa.float64(), _floats),
    "content": (pa.string(), _texts),
    "type": (pa.string(), st.one_of(_texts, st.sampled_from(["fact", "TASK", "event", "x"]))),
    "paths": (pa.list_(pa.string()), _lists),
    "path_count": (pa.int32(), st.one_of(st.none(), st.integers(-3, 2**31 - 1))),
    "salience": (pa.float32(), _floats),
    "pinned": (pa.bool_(), st.one_of(st.none(), st.booleans())),
    "lifecycle_state": (pa.string(), st.one_of(_texts, st.sampled_from(["stable", "Stable"]))),
    "event_time": (pa.timestamp("us", tz="UTC"), _times),
    "speaker": (pa.string(), _texts),
    "session_position": (pa.int64(), st.one_of(st.none(), st.integers(-2**40, 2**40))),
    "token_cost_estimate": (pa.uint32(), st.one_of(st.none(), st.integers(0, 2**32 - 1))),
    "contradicts": (pa.list_(pa.string()), _lists),
    "lexical": (pa.float64(), _floats),  # not a field: both paths ignore it
}


def _outcome(read):
    """The Candidates `read()`'s rows make, or the first error's message."""
    try:
        return to_candidates(read())
    except CandidateError as exc:
        return str(exc)


def _fast(cur, sql):
    return [row for batch in query_batches(cur, sql, None) for row in batch]


def _both(table: pa.Table):
    _CUR.register("given", table)
    try:
        return (_outcome(lambda: _fast(_CUR, "SELECT * FROM given")),
                _outcome(lambda: intake(_CUR.sql("SELECT * FROM given").to_arrow_table())))
    finally:
        _CUR.unregister("given")


@settings(deadline=None)
@given(st.data(), st.integers(1, 4),
       st.lists(st.sampled_from(sorted(COLUMNS)), min_size=0, max_size=len(COLUMNS),
                unique=True))
def test_plain_results_give_what_the_arrow_path_gives(data, n, extra):
    fields = ["id", "score", "content", *[f for f in extra if f not in ("id", "score",
                                                                        "content")]]
    columns = {f: pa.array([data.draw(COLUMNS[f][1]) for _ in range(n)], COLUMNS[f][0])
               for f in fields}
    table = pa.table(columns)
    _CUR.register("probe", table)
    try:
        assert plain_result(_CUR.execute("SELECT * FROM probe").description)
        _CUR.fetchall()
    finally:
        _CUR.unregister("probe")
    fast, arrow = _both(table)
    assert fast == arrow


@pytest.mark.parametrize(("select", "why"), [
    ("SELECT CAST('00000000-0000-4000-8000-000000000001' AS UUID) AS id, 0.5 AS score, "
     "'x' AS content", "a UUID id (and a DECIMAL score)"),
    ("SELECT 'a' AS id, 0.5::DOUBLE AS score, 'x' AS content, TIMESTAMP '2024-01-01' "
     "AS event_time", "a naive TIMESTAMP"),
    ("SELECT 'a' AS ID, 0.5::DOUBLE AS score, 'x' AS Content", "names in another case"),
    ("SELECT 'a' AS id, 0.5::DOUBLE AS score, 'x' AS content, 'y' AS content",
     "a name twice"),
    ("SELECT 'a' AS id, 0.5::DOUBLE AS score, 'x' AS content, NULL AS speaker",
     "an untyped NULL"),
])
def test_other_results_go_through_arrow_with_its_answers(select, why):
    description = _CUR.execute(select).description
    _CUR.fetchall()
    assert not plain_result(description), why
    assert _outcome(lambda: _fast(_CUR, select)) == _outcome(
        lambda: intake(_CUR.sql(select).to_arrow_table()))


def test_a_name_twice_still_gets_the_columnar_error():
    con = rms_duck.connect()
    with pytest.raises(CandidateError, match="columns named 'content'"):
        rms_duck.pack(con, "SELECT 'a' AS id, 0.5::DOUBLE AS score, 'x' AS content, "
                      "'y' AS content", budget=500, store=False)


def test_the_session_time_zone_changes_no_byte():
    """A query on a TEMP table runs on the connection itself, whose TimeZone a caller may
    set; Python values then arrive in that zone, and the bundle must not notice."""
    bundles = []
    for zone in ("UTC", "Asia/Tokyo", "America/St_Johns"):
        con = rms_duck.connect()
        con.execute(f"SET TimeZone = '{zone}'")
        con.execute("CREATE TEMP TABLE c (id VARCHAR, score DOUBLE, content VARCHAR, "
                    "event_time TIMESTAMPTZ)")
        start = datetime(2024, 3, 30, 23, 30, tzinfo=UTC)
        con.executemany("INSERT INTO c VALUES (?, ?, ?, ?)", [
            (f"n{i}", 0.9 - i / 10, f"note {i}", start + timedelta(hours=5 * i))
            for i in range(4)])
        bundles.append(rms_duck.pack(con, "SELECT * FROM c", budget=600, store=False))
        con.close()
    assert len({b.context for b in bundles}) == 1
    assert len({b.receipt for b in bundles}) == 1
    assert "30 Mar" in bundles[0].context and "31 Mar" in bundles[0].context


def test_max_rows_stops_a_plain_query_while_it_streams(monkeypatch):
    """Rows arrive in batches: a query far past max_rows is stopped after one batch."""
    monkeypatch.setattr(queryrows, "BATCH_ROWS", 1_000)
    con = rms_duck.connect()
    with pytest.raises(QueryLimitError, match="max_rows=10"):
        rms_duck.pack(con, "SELECT 'n' || i AS id, 0.5::DOUBLE AS score, 'x' AS content "
                      "FROM range(100000000) t(i)", budget=500, max_rows=10, store=False)
    assert con.execute("SELECT 1").fetchall() == [(1,)]


def test_duckdb_reports_the_type_names_the_plain_set_uses():
    got = _CUR.execute("SELECT 'a'::VARCHAR, 1::DOUBLE, 1::FLOAT, true, 1::TINYINT, "
                       "1::SMALLINT, 1::INTEGER, 1::BIGINT, 1::UTINYINT, 1::USMALLINT, "
                       "1::UINTEGER, 1::UBIGINT, now()::TIMESTAMPTZ, ['a']").description
    _CUR.fetchall()
    assert {str(column[1]) for column in got} == queryrows._PLAIN_TYPES
    assert isinstance(duckdb.__version__, str)

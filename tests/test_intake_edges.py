"""Values at the edges of what each entry path can hold, from the intake review: every path
accepts the same rows, or refuses them with a CandidateError naming the row and field."""

from __future__ import annotations

import uuid
from decimal import Decimal

import pandas as pd
import pyarrow as pa
import pytest

import rms_duck
from rms_duck.errors import CandidateError
from rms_duck.packing.pipeline import pack_candidates

INFINITY_ROWS = ("SELECT * FROM (VALUES ('a', {score}, 'x', NULL::TIMESTAMPTZ), "
                 "('b', 0.5, 'y', '{when}'::TIMESTAMPTZ)) AS t(id, score, content, valid_to)")


def _every_path(con, sql):
    """Pack the query's rows every way a user can; yield (path, callable)."""
    table = con.sql(sql).to_arrow_table()
    yield "query", lambda: rms_duck.pack(con, sql, budget=300, store=False)
    yield "relation", lambda: rms_duck.pack(con, con.sql(sql), budget=300, store=False)
    yield "table", lambda: rms_duck.pack(con, table, budget=300, store=False)
    grouped = table.append_column("g", pa.array([1] * len(table)))
    yield "batches", lambda: rms_duck.pack_batches(grouped, by="g", budget=300)
    yield "sql", lambda: con.execute(f"SELECT pack_context(list(c), 300) FROM ({sql}) c")\
        .fetchall()


@pytest.mark.parametrize("when", ["infinity", "-infinity"])
def test_an_infinite_time_is_refused_naming_the_row_on_every_path(con, when):
    for path, pack in _every_path(con, INFINITY_ROWS.format(score=0.5, when=when)):
        with pytest.raises(Exception, match=r"candidate #1 \(id 'b'\): field 'valid_to' must "
                           rf"be a time in years 1 to 9999, got '{when}'.*NULL for an open end"):
            pack()
        assert path


@pytest.mark.parametrize("value", [
    "DATE '10000-01-01'", "DATE '-0044-03-15'", "'infinity'::DATE", "'-infinity'::DATE",
    "TIMESTAMP '10000-01-01 00:00:00'", "TIMESTAMP '-0001-01-01 00:00:00'",
    "TIMESTAMPTZ '10000-01-01 00:00:00+00'"])
def test_a_date_or_time_outside_years_1_to_9999_is_refused_as_such_on_every_path(con, value):
    """A DATE out of range escaped as Arrow's 'Unsupported cast from date32[day] to int64';
    in SQL, a year past 9999 or a BC time was called 'not a timestamp'."""
    sql = f"SELECT 'a' AS id, 0.5 AS score, 'x' AS content, {value} AS event_time"
    for path, pack in _every_path(con, sql):
        with pytest.raises(Exception, match=r"candidate #0 \(id 'a'\): field 'event_time' "
                           r"must be a time in years 1 to 9999, got .*NULL for an open end"):
            pack()
        assert path


def test_an_earlier_rows_error_still_comes_first(con):
    for _, pack in _every_path(con, INFINITY_ROWS.format(score=1.5, when="infinity")):
        with pytest.raises(Exception, match=r"candidate #0 \(id 'a'\): field 'score'"):
            pack()


def test_a_year_past_9999_from_arrow_is_named():
    table = pa.table({"id": ["a"], "score": [0.5], "content": ["x"],
                      "valid_to": pa.array([253402300800000000], pa.timestamp("us", "UTC"))})
    with pytest.raises(CandidateError, match=r"field 'valid_to' must be a time in years 1 to "
                       r"9999, got timestamp\[us, tz=UTC\] value 253402300800000000"):
        rms_duck.pack(rms_duck.connect(), table, budget=300, store=False)


def test_pandas_nat_is_a_null_time_in_dicts_as_in_tables(con):
    frame = pd.DataFrame({"id": ["a", "b"], "score": [0.9, 0.5], "content": ["x", "y"],
                          "event_time": [pd.Timestamp("2023-01-05", tz="UTC"), pd.NaT]})
    by_table = rms_duck.pack(con, frame, budget=300, store=False)
    for config in ({"context_format": "reader"}, {"context_format": "auditable"}):
        by_dicts = pack_candidates(frame.to_dict("records"), budget=300, config=config)
        assert "NaT" not in by_dicts.context
        assert {r.id for r in by_dicts.included} == {"a", "b"}
    assert pack_candidates(frame.to_dict("records"), budget=300).context == by_table.context


def test_pandas_missing_values_are_null_in_dicts_as_in_tables(con):
    """pandas 3's str dtype marks a missing text with NaN, which to_dict("records") keeps:
    such rows were packed with the text 'nan' (a speaker 'nan:', a namespace section
    "nan"), where the same frame passed as a table reads NULL. pd.NA (nullable dtypes, as
    itertuples() gives them) printed as '<NA>'."""
    frame = pd.DataFrame({"id": ["a", "b", "c"], "score": [0.9, 0.5, 0.4],
                          "content": ["alpha", "beta", "gamma"],
                          "speaker": ["maya", None, "jonas"],
                          "namespace_id": ["ns", None, "ns"],
                          "session_id": ["s1", None, "s1"],
                          "type": ["fact", "note", "note"], "confidence": [0.9, 0.6, 0.8]})
    rows = frame.to_dict("records")
    assert rows[1]["speaker"] != rows[1]["speaker"]  # NaN, as pandas gives it
    for config in ({"context_format": "reader"}, {"context_format": "auditable"}):
        by_table = rms_duck.pack(con, frame, budget=400, config=config, store=False)
        by_dicts = pack_candidates(rows, budget=400, config=config)
        assert "nan" not in by_dicts.context
        assert by_dicts.context == by_table.context and by_dicts.receipt == by_table.receipt
    na_rows = [{**row, "speaker": pd.NA if row["speaker"] != row["speaker"] else row["speaker"],
                "namespace_id": pd.NA if row["id"] == "b" else row["namespace_id"],
                "confidence": pd.NA if row["id"] == "b" else row["confidence"]} for row in rows]
    assert pack_candidates(na_rows, budget=400).context == \
        rms_duck.pack(con, frame, budget=400, store=False).context
    missing_type = frame.assign(type=["fact", None, "note"])
    assert pack_candidates(missing_type.to_dict("records"), budget=400).context == \
        rms_duck.pack(con, missing_type, budget=400, store=False).context
    # A NaN where a number belongs is still a bad number, named as before.
    with pytest.raises(CandidateError, match=r"field 'salience' must be a number in \[0, 1\], "
                                             "got nan"):
        pack_candidates([{**rows[0], "salience": float("nan")}], budget=400)


def test_numpy_scalars_in_dict_rows_pack_as_the_table_does(con):
    """Rows read from a DataFrame as dict(frame.iloc[i]) (or frame[column][i]) hold numpy
    scalars: an np.int64 id or session_position and an np.bool_ pinned were refused ('must
    be a whole number, got np.int64(1); cast it to INTEGER'), though the budget takes
    np.int64 and the same frame packs as a table."""
    import numpy as np

    frame = pd.DataFrame({"id": [7, 8, 9], "score": [0.9, 0.5, 0.4],
                          "content": ["alpha", "beta", "gamma"], "pinned": [False, True, False],
                          "session_id": ["s", "s", "s"], "session_position": [1, 2, 3],
                          "path_count": [2, 0, 1], "token_cost_estimate": [3, 3, 3]})
    rows = [dict(frame.iloc[i]) for i in range(len(frame))]
    assert type(rows[0]["id"]) is np.int64 and type(rows[1]["pinned"]) is np.bool_
    by_dicts = pack_candidates(rows, budget=400)
    by_table = rms_duck.pack(con, frame, budget=400, store=False)
    assert by_dicts.context == by_table.context and by_dicts.receipt == by_table.receipt
    assert by_dicts.included_ids[0] == "8"  # the pin packs first
    with pytest.raises(CandidateError, match=r"field 'pinned' must be true or false, got 1"):
        pack_candidates([{**rows[0], "pinned": 1}], budget=400)


def test_nanosecond_times_are_refused_on_every_pandas_path(con):
    frame = pd.DataFrame({"id": ["a"], "score": [0.9], "content": ["x"], "event_time": [
        pd.Timestamp("2023-01-05 12:34:00.123456789", tz="UTC")]})
    message = r"field 'event_time' has nanoseconds; candidates keep microseconds"
    with pytest.raises(CandidateError, match=message):
        pack_candidates(frame.to_dict("records"), budget=300)
    with pytest.raises(CandidateError, match=message):
        rms_duck.pack(con, frame, budget=300, store=False)
    with pytest.raises(CandidateError, match="holds times with nanoseconds"):
        rms_duck.pack_batches(frame.assign(g=1), by="g", budget=300)
    whole = frame.assign(event_time=frame.event_time.dt.floor("us"))
    assert pack_candidates(whole.to_dict("records"), budget=300).tokens_used > 0


@pytest.mark.parametrize("value", [10**400, 10**5000, Decimal("sNaN"), Decimal("-Infinity")],
                         ids=["1e400", "1e5000", "sNaN", "-Infinity"])
def test_numbers_python_cannot_make_a_float_of_are_named(value):
    for field in ("score", "salience", "confidence"):
        row = {"id": "a", "score": 0.5, "content": "x", field: value}
        with pytest.raises(CandidateError, match=rf"field '{field}' must be a number in \[0, 1\]"):
            pack_candidates([row], budget=300)


def test_a_pandas_index_is_never_a_candidate_field(con):
    frame = pd.DataFrame({"score": [0.9, 0.5], "content": ["x", "y"], "id": ["a", "b"],
                          "namespace_id": ["home", "work"]}).set_index("namespace_id")
    plain = frame.reset_index(drop=True)
    assert rms_duck.pack(con, frame, budget=300, store=False).context == \
        rms_duck.pack(con, plain, budget=300, store=False).context
    # The index is still not read; the error names it as the index (763e739).
    with pytest.raises(CandidateError, match=r"the DataFrame's 'id' is its index \('id'\), "
                       r"and a pandas index is never read as a column; make it a column "
                       r"first: df.reset_index\(\)"):
        rms_duck.pack(con, frame.reset_index().set_index("id"), budget=300, store=False)


def test_an_error_shows_a_binary_uuid_id_as_the_uuid():
    raw = uuid.UUID(int=42)
    row = {"id": raw.bytes, "score": 2.0, "content": "x"}
    with pytest.raises(CandidateError, match=rf"candidate #0 \(id '{raw}'\): field 'score'"):
        pack_candidates([row], budget=300)


@pytest.mark.parametrize("field, value", [("session_position", 3_000_000_000),
                                          ("path_count", 2**31), ("token_cost_estimate", -2**40),
                                          ("session_position", 2**53 + 1)])
@pytest.mark.parametrize("through", ["rows", "arrow"])
def test_whole_fields_outside_32_bits_are_refused_on_every_path(con, field, value, through):
    """Input review F3: Python took a session_position of 3e9 that SQL's INTEGER field
    cannot hold (DuckDB failed the cast naming no field)."""
    row = {"id": "a", "score": 0.5, "content": "x", field: value}
    with pytest.raises(CandidateError, match=rf"field '{field}' must be in "
                       r"-2,147,483,648\.\.2,147,483,647 \(a 32-bit INTEGER\)"):
        if through == "rows":
            pack_candidates([row], budget=300)
        else:
            rms_duck.pack(con, pa.Table.from_pylist([row]), budget=300, store=False)


def test_whole_decimals_are_whole_numbers():
    import decimal

    row = {"id": "a", "score": 0.5, "content": "x", "path_count": decimal.Decimal(2)}
    assert pack_candidates([row], budget=300).tokens_used > 0


def test_a_pandas_column_arrow_cannot_convert_is_ignored_unless_it_feeds_a_field(con):
    """Unknown columns are ignored, but one Arrow could not convert (an object column of
    ints and texts) failed the whole pack, advising pa.Table.from_pylist, which fails too."""
    frame = pd.DataFrame({"id": ["a", "b"], "score": [0.9, 0.5], "content": ["x", "y"],
                          "meta": [1, "two"]})
    clean = frame.drop(columns="meta")
    assert rms_duck.pack(con, frame, budget=300, store=False).context == \
        rms_duck.pack(con, clean, budget=300, store=False).context
    grouped = rms_duck.pack_batches(frame.assign(g=1), by="g", budget=300)
    assert grouped.column("context").to_pylist() == rms_duck.pack_batches(
        clean.assign(g=1), by="g", budget=300).column("context").to_pylist()
    mixed = clean.assign(content=["x", 3])
    for pack in (lambda: rms_duck.pack(con, mixed, budget=300, store=False),
                 lambda: rms_duck.pack_batches(mixed.assign(g=1), by="g", budget=300)):
        with pytest.raises(CandidateError, match=r"column content.*must share one type.*"
                           r"astype\(str\)"):
            pack()
    with pytest.raises(CandidateError, match=r"column g .*must share one type"):
        rms_duck.pack_batches(clean.assign(g=[1, "one"]), by="g", budget=300)


def test_the_fix_for_a_column_arrow_cannot_convert_names_that_column(con):
    """The advice said df['content'] = df['content'].astype(str) whichever column failed."""
    frame = pd.DataFrame({"id": ["a", "b"], "score": [0.9, 0.5], "content": ["x", "y"],
                          "speaker": [1, "Ann"]})
    fix = r"df\['speaker'\] = df\['speaker'\]\.astype"
    with pytest.raises(CandidateError, match=fix) as caught:
        rms_duck.pack(con, frame, budget=300, store=False)
    assert "df['content']" not in str(caught.value)

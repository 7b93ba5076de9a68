"""A NaN in a number field is bad input on every path, refused in the same words; a pandas
DataFrame's NaN is a missing value (pandas' convention), read as NULL.

Before: a Candidate with a NaN score packed, ahead of every real score; NaN in a FLOAT or
DOUBLE whole field of a SQL list met DuckDB's cast error, which names no candidate and no
field; the other paths said "normalise scores" or "cast it to INTEGER", which no NaN obeys.
"""

from __future__ import annotations

import math

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import rms_duck
from rms_duck import pack_candidates
from rms_duck.duck.wholecast import wholes_as_double_type
from rms_duck.errors import CandidateError
from rms_duck.records import Candidate

NAN = float("nan")
NUMBER_FIELDS = ("score", "salience", "confidence", "path_count", "session_position",
                 "token_cost_estimate")
GOOD = {"id": "a", "score": 0.5, "content": "x"}


def _rows(field: str, value: object) -> list[dict[str, object]]:
    """A good row, then row #1 holding `value`; both have the field, so Arrow types it."""
    return [GOOD if field == "score" else {**GOOD, field: None},
            {**GOOD, "id": "b", field: value}]


def _message(field: str) -> str:
    expectation = ("must be a number in [0, 1]" if field in ("score", "salience", "confidence")
                   else "must be a whole number")
    fix = ("drop the row or give it a score in [0, 1]" if field == "score"
           else "pass NULL (None in Python) where there is no value")
    return f"candidate #1 (id 'b'): field {field!r} {expectation}, got nan; NaN is no number: {fix}"


def _python_error(pack) -> str:
    with pytest.raises(CandidateError) as raised:
        pack()
    return str(raised.value)


@pytest.mark.parametrize("field", NUMBER_FIELDS)
def test_a_nan_number_is_refused_in_the_same_words_on_every_path(con, field):
    rows = _rows(field, NAN)
    table = pa.Table.from_pylist(rows)
    assert table.column(field)[1].is_valid  # a real NaN, not Arrow's NULL
    con.register("nan_rows", table)
    paths = {
        "dict rows": lambda: pack_candidates(rows, budget=300),
        "Candidates": lambda: pack_candidates(
            [Candidate(**{k: v for k, v in row.items() if v is not None}) for row in rows],
            budget=300),
        "pyarrow Table": lambda: rms_duck.pack(con, table, budget=300, store=False),
        "RecordBatch": lambda: rms_duck.pack(con, table.to_batches()[0], budget=300,
                                             store=False),
        "polars": lambda: rms_duck.pack(con, pl.from_arrow(table), budget=300, store=False),
        "DuckDB relation": lambda: rms_duck.pack(con, con.sql("SELECT * FROM nan_rows"),
                                                 budget=300, store=False),
        "ranking query": lambda: rms_duck.pack(con, "SELECT * FROM nan_rows", budget=300,
                                               store=False),
        "pack_batches": lambda: rms_duck.pack_batches(table.append_column(
            "g", pa.array([1, 1])), by="g", budget=300, processes=1),
    }
    expected = _message(field)
    for name, pack in paths.items():
        message = _python_error(pack)
        assert message.startswith(expected), (name, message)
    for kind in ("DOUBLE", "FLOAT"):
        bad = f"'id': 'b', 'score': 0.5, 'content': 'x', '{field}': 'nan'::{kind}"
        if field == "score":
            bad = f"'id': 'b', 'score': 'nan'::{kind}, 'content': 'x'"
        sql_list = f"[{{'id': 'a', 'score': 0.5, 'content': 'x'}}, {{{bad}}}]"
        for call in (f"pack_context({sql_list}, 300)", f"rms_store({sql_list}, 300)"):
            with pytest.raises(duckdb.Error) as raised:
                con.execute(f"SELECT {call}").fetchall()
            assert f"CandidateError: {expected} (in the candidate list" in str(raised.value), \
                (call, str(raised.value))
    assert con.execute("SELECT count(*) FROM rms_bundles").fetchone() == (0,)


def test_a_candidate_with_a_nan_score_no_longer_outranks_every_other():
    candidates = [Candidate(id="a", score=NAN, content="alpha"),
                  Candidate(id="b", score=0.9, content="beta")]
    with pytest.raises(CandidateError, match=r"candidate #0 \(id 'a'\): field 'score' must be "
                                             r"a number in \[0, 1\], got nan"):
        pack_candidates(candidates, budget=300)
    # A Candidate without NaN is taken as built, a list for its paths included.
    built = Candidate(id="c", score=0.5, content="gamma", paths=["VECTOR"])  # type: ignore[arg-type]
    assert pack_candidates([built], budget=300).included_ids == ["c"]


@pytest.mark.parametrize("numbers", [
    {"score": [0.9, 0.4], "salience": [NAN, 1.0], "confidence": [0.8, NAN]},
    {"score": [0.9, 0.4], "path_count": [NAN, 2.0], "session_position": [1.0, NAN],
     "token_cost_estimate": [NAN, NAN]},
], ids=["unit fields", "whole fields"])
def test_a_dataframe_reads_its_nan_as_a_missing_value(con, numbers):
    frame = pd.DataFrame({"id": ["a", "b"], "content": ["alpha", "beta"],
                          "session_id": ["s", "s"], **numbers})
    missing = [{key: None if isinstance(value, float) and math.isnan(value) else value
                for key, value in row.items()} for row in frame.to_dict("records")]
    expected = pack_candidates(missing, budget=300)
    assert rms_duck.pack(con, frame, budget=300, store=False).context == expected.context
    batches = rms_duck.pack_batches(frame.assign(g=1), by="g", budget=300, processes=1)
    assert batches.column("context").to_pylist() == [expected.context]
    # Rows of the frame are dicts, which cannot tell a missing number from a computed NaN.
    with pytest.raises(CandidateError, match=r"got nan; NaN is no number"):
        pack_candidates(frame.to_dict("records"), budget=300)


@pytest.mark.parametrize("field, expectation, missing", [
    ("score", "is required and must be a number in [0, 1]", pd.NA),
    ("id", "is required and must be a non-empty id", pd.NA),
    ("id", "is required and must be a non-empty id", NAN),  # pandas 3's missing text
    ("content", "is required text", NAN),
])
def test_a_missing_required_value_from_pandas_is_named_as_a_null_one(con, field, expectation,
                                                                     missing):
    """A DataFrame's missing score, id or content is NULL; in dict rows of a frame (pd.NA,
    or NaN where no number belongs) it was refused as a value of the wrong type ('cast it
    to DOUBLE', 'must be text') instead of as a missing one."""
    rows = [{"id": "a", "score": 0.9, "content": "alpha"},
            {"id": "b", "score": 0.5, "content": "beta", field: missing}]
    frame = pd.DataFrame(rows)
    by_table = _python_error(lambda: rms_duck.pack(con, frame, budget=300, store=False))
    by_dicts = _python_error(lambda: pack_candidates(rows, budget=300))
    assert f"field {field!r} {expectation}, got None (SQL NULL);" in by_table
    assert f"field {field!r} {expectation}, got {missing!r};" in by_dicts


def test_a_numpy_nan_where_no_number_belongs_is_missing_in_dicts_as_in_tables(con):
    rows = [{"id": "a", "score": 0.5, "content": "x", "speaker": np.float64(NAN)}]
    by_dicts = pack_candidates(rows, budget=300)
    assert "nan" not in by_dicts.context
    assert by_dicts.context == pack_candidates([rows[0] | {"speaker": None}], budget=300).context
    with pytest.raises(CandidateError, match=r"field 'salience' must be a number in \[0, 1\], "
                                             r"got np.float64\(nan\); NaN is no number"):
        pack_candidates([{**rows[0], "salience": np.float64(NAN)}], budget=300)


@pytest.mark.parametrize("value, expected", [
    ("'inf'::DOUBLE", "field 'path_count' must be a whole number, got inf"),
    ("1e19::DOUBLE", "field 'path_count' must be in -2,147,483,648..2,147,483,647 (a 32-bit "
                     "INTEGER), got 10000000000000000000"),
    ("3e9::FLOAT", "field 'path_count' must be in -2,147,483,648..2,147,483,647 (a 32-bit "
                   "INTEGER), got 3000000000"),
])
def test_sql_whole_values_no_cast_takes_are_named_as_in_python(con, value, expected):
    """They failed with DuckDB's "Type DOUBLE with value nan can't be cast ... INT64"."""
    with pytest.raises(duckdb.Error, match=r"CandidateError: candidate #0 \(id 'a'\): "
                       + expected.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        con.execute("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'x', "
                    f"'path_count': {value}}}], 300)").fetchall()


def test_sql_whole_values_checked_first_keep_the_python_order_and_rounding(con):
    # The first error in row order, as the Python entry points raise it: not the NaN.
    with pytest.raises(duckdb.Error, match=r"candidate #0 \(id 'a'\): field 'score' must be a "
                                           r"number in \[0, 1\], got 1\.5"):
        con.execute("SELECT pack_context([{'id': 'a', 'score': 1.5, 'content': 'x', "
                    "'path_count': 1.0}, {'id': 'b', 'score': 0.5, 'content': 'x', "
                    "'path_count': 'nan'::DOUBLE}], 300)").fetchall()
    # Within a row too: type comes before path_count.
    with pytest.raises(duckdb.Error, match=r"field 'type' must be one of"):
        con.execute("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'x', "
                    "'type': 'facts', 'path_count': 'nan'::DOUBLE}], 300)").fetchall()
    # A GROUP BY names the list holding it.
    with pytest.raises(duckdb.Error, match=r"candidate #1 \(id 'n4'\): field 'path_count' .* "
                                           r"\(in the candidate list whose smallest id is "
                                           r"'n1'\)"):
        con.execute("SELECT pack_context(list({'id': 'n' || x, 'score': 0.5, 'content': 'x', "
                    "'path_count': CASE WHEN x = 4 THEN 'nan'::DOUBLE ELSE 1 END} ORDER BY x), "
                    "300) FROM range(6) t(x) GROUP BY x % 3").fetchall()
    # A fractional DOUBLE is still rounded by the cast, as docs/packing.md says.
    kept = con.execute("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'x', "
                       "'path_count': 1.5::DOUBLE}], 300).included[1].id").fetchone()
    assert kept == ("a",)


def test_the_whole_value_check_casts_to_rms_candidate_with_double_whole_fields(con):
    """Every field name of rms_candidate, so the check's cast binds wherever the real one
    does; only the whole fields differ."""
    canonical = con.execute("SELECT typeof(NULL::rms_candidate)").fetchone()[0]
    checked = con.execute(f"SELECT typeof(NULL::{wholes_as_double_type()})").fetchone()[0]
    for field in ("path_count", "session_position", "token_cost_estimate"):
        canonical = canonical.replace(f"{field} BIGINT", f"{field} DOUBLE")
    assert checked == canonical

"""Bad input gets a clear error that names the field, the value and the fix, from Python and
through SQL (where DuckDB prefixes "Python exception occurred while executing the UDF:"),
and a failed pack stores nothing.
"""

from __future__ import annotations

import json
from datetime import date

import duckdb
import pyarrow as pa
import pytest

import rms_duck
from rms_duck.config import parse_config
from rms_duck.errors import (
    CandidateError,
    ConfigError,
    EncodingUnavailableError,
    QueryRejectedError,
    RmsError,
)

UDF_PREFIX = "Python exception occurred while executing the UDF: "
GOOD = {"id": "a", "score": 0.5, "content": "x"}
GOOD_SQL = "{'id': 'a', 'score': 0.5, 'content': 'x'}"


@pytest.fixture(scope="module")
def shared_con():
    """One connection for the read-only error cases (connect() costs ~0.4 s)."""
    connection = rms_duck.connect()
    yield connection
    connection.close()


def case(id, *, rows=None, sql_rows=None, config=None, sql_config=None, error, phrases):
    return pytest.param(rows or [GOOD], sql_rows or f"[{GOOD_SQL}]", config, sql_config,
                        error, phrases, id=id)


CASES = [
    case("null-score",
         rows=[{"id": "a", "score": None, "content": "x"}],
         sql_rows="[{'id': 'a', 'score': NULL::DOUBLE, 'content': 'x'}]",
         error=CandidateError,
         phrases=["candidate #0 (id 'a')", "field 'score'", "got None",
                  "filter out NULL scores or COALESCE them to 0"]),
    case("nan-score",
         rows=[GOOD, {"id": "b", "score": float("nan"), "content": "x"}],
         sql_rows=f"[{GOOD_SQL}, {{'id': 'b', 'score': 'nan'::DOUBLE, 'content': 'x'}}]",
         error=CandidateError,
         phrases=["candidate #1 (id 'b')", "field 'score'", "must be a number in [0, 1]",
                  "got nan", "NaN is no number: drop the row or give it a score"]),
    case("score-above-one",
         rows=[{"id": "a", "score": 1.5, "content": "x"}],
         sql_rows="[{'id': 'a', 'score': 1.5, 'content': 'x'}]",
         error=CandidateError,
         phrases=["field 'score'", "must be a number in [0, 1]", "got 1.5", "normalise scores"]),
    case("negative-score",
         rows=[{"id": "a", "score": -0.25, "content": "x"}],
         sql_rows="[{'id': 'a', 'score': -0.25, 'content': 'x'}]",
         error=CandidateError,
         phrases=["field 'score'", "got -0.25", "normalise scores"]),
    case("missing-id",
         rows=[{"score": 0.5, "content": "x"}],
         sql_rows="[{'score': 0.5, 'content': 'x'}]",
         error=CandidateError,
         phrases=["candidate #0: field 'id' is required but missing (keys given: 'score', "
                  "'content')", "every candidate needs id, score and content: add them"]),
    case("blank-id",
         rows=[{"id": "  ", "score": 0.5, "content": "x"}],
         sql_rows="[{'id': '  ', 'score': 0.5, 'content': 'x'}]",
         error=CandidateError,
         phrases=["field 'id' is required and must be a non-empty id", "got '  '"]),
    case("missing-content",
         rows=[{"id": "a", "score": 0.5}],
         sql_rows="[{'id': 'a', 'score': 0.5}]",
         error=CandidateError,
         phrases=["candidate #0 (id 'a')", "field 'content' is required but missing (keys "
                  "given: 'id', 'score')", "every candidate needs id, score and content"]),
    case("unknown-type",
         rows=[{**GOOD, "type": "facts"}],
         sql_rows="[{'id': 'a', 'score': 0.5, 'content': 'x', 'type': 'facts'}]",
         error=CandidateError,
         phrases=["field 'type' must be one of entity, event, fact", "got 'facts'",
                  "Did you mean 'fact'?"]),
    case("unknown-lifecycle",
         rows=[{**GOOD, "lifecycle_state": "stabel"}],
         sql_rows="[{'id': 'a', 'score': 0.5, 'content': 'x', 'lifecycle_state': 'stabel'}]",
         error=CandidateError,
         phrases=["field 'lifecycle_state' must be one of tentative, stable", "got 'stabel'",
                  "Did you mean 'stable'?"]),
    case("lifecycle-active",
         rows=[{**GOOD, "type": "task", "lifecycle_state": "active"}],
         sql_rows="[{'id': 'a', 'score': 0.5, 'content': 'x', 'lifecycle_state': 'active'}]",
         error=CandidateError,
         phrases=["field 'lifecycle_state'", "got 'active'", "'tentative' or 'stable'",
                  "use 'stable'"]),
    case("negative-overhead",
         config={"overhead_tokens": -5}, sql_config="{'overhead_tokens': -5}",
         error=ConfigError,
         phrases=["config field 'overhead_tokens'", "got -5", "use 0 to reserve nothing"]),
    case("unknown-encoding",
         config={"encoding": "cl100k"}, sql_config="{'encoding': 'cl100k'}",
         error=EncodingUnavailableError,
         phrases=["unknown encoding 'cl100k'", "Did you mean 'cl100k_base'?",
                  "Known encodings:"]),
    case("malformed-json-config",
         config='{"context_format": "reader",',
         sql_config="""'{"context_format": "reader",'""",
         error=ConfigError,
         phrases=["config is not valid JSON", "position 28", "'{\"context_format\": \"reader\",'",
                  "pass an object such as"]),
    case("config-not-an-object",
         config="[1, 2]", sql_config="'[1, 2]'",
         error=ConfigError,
         phrases=["config must be a JSON object of PackingConfig fields", "got [1, 2]"]),
    case("unknown-config-key",
         config={"context_fromat": "reader"}, sql_config="{'context_fromat': 'reader'}",
         error=ConfigError,
         phrases=["unknown config field 'context_fromat'", "Did you mean 'context_format'?",
                  "Known fields: context_format,"]),
    case("unknown-format",
         config={"context_format": "markdown"}, sql_config="{'context_format': 'markdown'}",
         error=ConfigError,
         phrases=["config field 'context_format' has unknown value 'markdown'",
                  "Use one of: reader, auditable, compact"]),
    case("format-not-text",  # a list or dict raised a bare TypeError (unhashable type)
         config={"context_format": ["reader"]}, sql_config={"context_format": ["reader"]},
         error=ConfigError,
         phrases=["config field 'context_format' has unknown value ['reader']",
                  "Use one of: reader, auditable, compact"]),
    # These three named the field and the value but no fix.
    case("query-not-text",
         config={"query": 5}, sql_config="""'{"query": 5}'""",
         error=ConfigError,
         phrases=["config field 'query' must be text, got 5",
                  "pass the question as a string"]),
    case("min-score-out-of-range",
         config={"min_score": 2}, sql_config="""'{"min_score": 2}'""",
         error=ConfigError,
         phrases=["config field 'min_score' must be a number in [0, 1], got 2",
                  "the default is 0.0"]),
    case("citations-as-a-string",
         config={"context_citations": "true"}, sql_config="""'{"context_citations": "true"}'""",
         error=ConfigError,
         phrases=["config field 'context_citations' must be true or false, got 'true'",
                  "JSON true or false, not a string"]),
    case("citations-with-auditable",
         config={"context_format": "auditable", "context_citations": True},
         sql_config="{'context_format': 'auditable', 'context_citations': true}",
         error=ConfigError,
         phrases=["config field 'context_citations' applies only to context_format 'reader'",
                  "got context_format 'auditable'", "drop context_citations or use reader"]),
]


@pytest.mark.parametrize("rows, sql_rows, config, sql_config, error, phrases", CASES)
def test_python_error_names_field_value_and_fix(rows, sql_rows, config, sql_config, error,
                                                phrases):
    with pytest.raises(error) as raised:
        rms_duck.pack_candidates(rows, budget=500, config=config)
    assert isinstance(raised.value, RmsError)
    message = str(raised.value)
    for phrase in phrases:
        assert phrase in message


@pytest.mark.parametrize("rows, sql_rows, config, sql_config, error, phrases", CASES)
def test_sql_error_reads_well_after_duckdbs_prefix(shared_con, rows, sql_rows, config,
                                                   sql_config, error, phrases):
    args = f"{sql_rows}, 500" + (f", {sql_config}" if sql_config else "")
    with pytest.raises(duckdb.InvalidInputException) as raised:
        shared_con.sql(f"SELECT pack_context({args})").fetchall()
    message = str(raised.value)
    # "...the UDF: CandidateError: candidate #0 ...": the class name, then our message.
    assert f"{UDF_PREFIX}{error.__name__}: " in message
    lacking = [n for n in ("id", "score", "content") if f"'{n}':" not in sql_rows]
    if lacking:  # a STRUCT without the field is refused by field, before any row
        phrases = [f"pack_context: the candidates lack the field {lacking[0]!r}",
                   "every candidate needs id, score and content"]
    for phrase in phrases:
        assert phrase in message


@pytest.mark.parametrize("rows, sql_rows, config, sql_config, error, phrases", CASES)
def test_python_pack_api_gives_the_same_errors(shared_con, rows, sql_rows, config, sql_config,
                                               error, phrases):
    table = pa.Table.from_pylist(rows)
    with pytest.raises(error) as raised:
        rms_duck.pack(shared_con, table, budget=500, config=config)
    lacking = [n for n in ("id", "score", "content") if n not in table.column_names]
    if lacking:  # a table without the column is refused by column, before any row
        phrases = [f"the candidate rows lack the column {lacking[0]!r}",
                   "every candidate needs id, score and content"]
    for phrase in phrases:
        assert phrase in str(raised.value)
    assert count_stored(shared_con) == (0, 0)  # no case, so far, stored anything


@pytest.mark.parametrize("budget", [None, 1.5, "500", True])
def test_budget_must_be_a_whole_number(budget):
    shown = r"None \(SQL NULL\)" if budget is None else repr(budget).replace(".", r"\.")
    with pytest.raises(ConfigError, match=r"budget must be a whole number of tokens, got "
                       + shown + "; pass for example 4096"):
        rms_duck.pack_candidates([GOOD], budget=budget)


def test_whole_budgets_of_numeric_types_are_taken():
    """Input review F7: np.int64(400) and Decimal(400) were refused as not whole."""
    import decimal

    import numpy as np

    for budget in (np.int64(400), np.int32(400), decimal.Decimal(400), decimal.Decimal("4E2")):
        assert rms_duck.pack_candidates([GOOD], budget=budget).context_budget == 400
    for budget in (decimal.Decimal("400.5"), decimal.Decimal("NaN"), np.bool_(True)):
        with pytest.raises(ConfigError, match="budget must be a whole number of tokens"):
            rms_duck.pack_candidates([GOOD], budget=budget)


def test_config_bytes_that_are_not_utf8():
    # mypy found this path: json.loads raises UnicodeDecodeError, which has no .msg/.pos.
    with pytest.raises(ConfigError, match=r"config bytes are not UTF-8 \(invalid start byte at "
                                          r"byte 0\): b'\\xff\{'; pass the JSON as UTF-8"):
        rms_duck.pack_candidates([GOOD], budget=500, config=b"\xff{")


def test_null_budget_in_sql(shared_con):
    with pytest.raises(duckdb.InvalidInputException,
                       match=r"ConfigError: budget must be a whole number of tokens, got None "
                             r"\(SQL NULL\)"):
        shared_con.sql(f"SELECT pack_context([{GOOD_SQL}], NULL)").fetchall()


def test_a_null_field_reads_as_sql_null(shared_con):
    with pytest.raises(duckdb.InvalidInputException,
                       match=r"field 'content' is required text, got None \(SQL NULL\)"):
        shared_con.sql("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': NULL}], "
                       "500)").fetchall()


@pytest.mark.parametrize("candidates, given, advice", [
    ("['a', 'b']", "VARCHAR[]", "aggregate ranked rows"),
    ("[1, 2]", "INTEGER[]", "aggregate ranked rows"),
    ("'[{}]'", "VARCHAR", "aggregate ranked rows"),
    # JSON's cast to a STRUCT wants all 26 fields (input review F5): refused up front.
    ("'[{\"id\": \"a\", \"score\": 0.5, \"content\": \"x\"}]'::JSON", "JSON",
     "aggregate ranked rows"),
    ("{'id': 'a', 'score': 0.5, 'content': 'x'}", "STRUCT(id VARCHAR",
     "put one candidate in [ ], or aggregate ranked rows"),
])
@pytest.mark.parametrize("fn", ["pack_context", "rms_store"])
def test_candidates_that_are_not_a_list_of_structs_are_refused_by_name(shared_con, fn,
                                                                        candidates, given,
                                                                        advice):
    """Was DuckDB's cast error, which printed the whole 26-field candidate type."""
    with pytest.raises(duckdb.InvalidInputException) as raised:
        shared_con.sql(f"SELECT {fn}({candidates}, 500)").fetchall()
    message = str(raised.value)
    assert (f"{fn}: candidates must be a LIST of STRUCTs (one per candidate, with at least id, "
            f"score and content), got a value of type {given}") in message
    assert f"{advice}: {fn}(list({{'id': id, 'score': score, 'content': content}}), 4096)" \
        in message
    assert "token_cost_estimate" not in message
    assert count_stored(shared_con) == (0, 0)


SQL_FIELD_CASES = [
    ("'high' AS score", "'score' has type VARCHAR, but it must be a number", "CAST(x AS DOUBLE)"),
    ("'LEXICAL' AS paths", "'paths' has type VARCHAR, but it must be a list of text",
     "[x] or list(x)"),
    ("'maybe' AS pinned", "'pinned' has type VARCHAR, but it must be a BOOLEAN", "x > 0"),
    ("0.5::DOUBLE AS pinned", "'pinned' has type DOUBLE, but it must be a BOOLEAN", "x > 0"),
    ("'caf\\xC3\\xA9'::BLOB AS content", "'content' has type BLOB, but it must be text",
     "decode(x)"),
    ("[1, 2] AS content", "'content' has type INTEGER[], but it must be text",
     "array_to_string(x, ' ')"),
    ("{'a': 1} AS structured_value", "'structured_value' has type STRUCT(a INTEGER)",
     "to_json(x)"),
    # The cast matches names without regard to case, and so does the check.
    ("'maybe' AS \"PINNED\"", "'PINNED' has type VARCHAR, but it must be a BOOLEAN", "x > 0"),
    ("true AS \"Content\"", "'Content' has type BOOLEAN, but it must be text", "decode(x)"),
    ("7 AS content", "'content' has type INTEGER, but it must be text", "decode(x)"),
    ("['a'] AS structured_value", "'structured_value' has type VARCHAR[]", "to_json(x)"),
    # Last review F5/F6: Python stores a DECIMAL as a string and a FLOAT at full width.
    ("1.5 AS structured_value", "'structured_value' has type DECIMAL(2,1), but it must be "
     "JSON text, a whole number, a DOUBLE or a list of them", "to_json(x)"),
    ("0.1::FLOAT AS structured_value", "'structured_value' has type FLOAT", "to_json(x)"),
    ("[true] AS evidence_ids", "'evidence_ids' has type BOOLEAN[], but it must be a list of "
     "ids", "VARCHAR[] list of node ids"),
    ("{'a': 1} AS paths", "'paths' has type STRUCT(a INTEGER), but it must be a list of text",
     "[x] or list(x)"),
]


@pytest.mark.parametrize("fn", ["pack_context", "rms_store"])
@pytest.mark.parametrize("extra, message, fix", SQL_FIELD_CASES)
def test_sql_candidate_fields_of_a_type_the_cast_would_change_are_named(shared_con, fn, extra,
                                                                        message, fix):
    """Input review F3/F4: SQL cast 1.5 to path_count 2, 0.5 to pinned, a BLOB to escaped
    text, a list to its text, and failed on 'high' with a message naming no field; the
    Python entry points refuse each by field."""
    name = extra.rsplit(" AS ", 1)[1].strip('"').lower()
    base = {"id": "'a' AS id", "score": "0.9::DOUBLE AS score", "content": "'hello' AS content"}
    query = ("SELECT " + ", ".join(v for k, v in base.items() if k != name) + ", " + extra)
    before = count_stored(shared_con)
    with pytest.raises(duckdb.Error) as raised:
        shared_con.sql(f"SELECT {fn}(list(c), 400) FROM ({query}) AS c").fetchall()
    text = str(raised.value)
    assert f"CandidateError: {fn}: candidate field {message}" in text
    assert fix in text
    assert count_stored(shared_con) == before


@pytest.mark.parametrize("extra", [
    "uuid() AS id", "2::DECIMAL(4,0) AS path_count", "[]::VARCHAR[] AS paths", "[] AS paths",
    "'fact'::ENUM('fact', 'note') AS type", "NULL AS speaker", "2::UTINYINT AS path_count",
    "'{\"a\": 1}'::JSON AS structured_value", "[uuid()] AS contradicts", "1 AS score",
    "DATE '2026-01-02' AS event_time", "TIMESTAMP_NS '2026-01-02 03:04:05.123456' AS valid_to",
    "0.5::DECIMAL(3,2) AS salience", "true AS pinned", "3::HUGEINT AS token_cost_estimate",
    # Lossless casts (diff review: refusing them broke the dbt example's INTEGER ids).
    "7 AS id", "12::HUGEINT AS id", "uuid() AS session_id", "[uuid()] AS paths",
    "to_json('x') AS content", "3.0::DOUBLE AS path_count", "ceil(2.2) AS path_count",
    "7 AS session_id", "7 AS speaker", "7 AS namespace_id", "[1, 2] AS paths",
    "7 AS structured_value", "[1, 2] AS structured_value", "[1] AS evidence_ids",
    "1.5::DOUBLE AS structured_value", "[1.5::DOUBLE] AS structured_value",
])
def test_sql_candidate_fields_of_castable_types_still_pack(shared_con, extra):
    name = extra.rsplit(" AS ", 1)[1]
    base = {"id": "'a' AS id", "score": "0.9::DOUBLE AS score", "content": "'hello' AS content"}
    query = "SELECT " + ", ".join(v for k, v in base.items() if k != name) + ", " + extra
    used = shared_con.sql(f"SELECT (pack_context(list(c), 400)).tokens_used, typeof(list(c)) "
                          f"FROM ({query}) AS c").fetchall()
    assert used[0][0] > 0 and "_1 " not in used[0][1]  # no column renamed: each one is read


def test_a_field_name_or_enum_member_with_a_line_break_is_still_a_struct_list(shared_con):
    """Diff review: the guard's pattern did not let '.' cross a newline in the type text."""
    used = shared_con.sql("SELECT (pack_context([{'id': 'a', 'score': 0.5, 'content': 'x', "
                          "'a\nb': 1, 'kind': 'p'::ENUM('p', 'q\nr')}], 400)).tokens_used")
    assert used.fetchall()[0][0] > 0


def test_an_empty_candidate_list_is_no_candidates_as_null_is(shared_con):
    """Input review F6: [] was refused as a "NULL"[] while NULL gave NO_CANDIDATES."""
    for empty in ("[]", "NULL"):
        flags = shared_con.sql(f"SELECT (pack_context({empty}, 400)).flags").fetchall()
        assert flags == [(["NO_CANDIDATES"],)]


@pytest.mark.parametrize("candidates", [
    "[{'id': 'a', 'score': 0.5, 'content': 'x'}]",
    "array_value({'id': 'a', 'score': 0.5, 'content': 'x'})",
])
def test_lists_and_arrays_of_structs_still_pack(shared_con, candidates):
    used = shared_con.sql(f"SELECT pack_context({candidates}, 500).tokens_used").fetchall()
    assert used[0][0] > 0


def test_unknown_encoding_in_rms_token_count(shared_con):
    with pytest.raises(duckdb.InvalidInputException) as raised:
        shared_con.sql("SELECT rms_token_count('hello', 'cl100k')").fetchall()
    message = str(raised.value)
    assert f"{UDF_PREFIX}EncodingUnavailableError: unknown encoding 'cl100k'." in message
    assert "Did you mean 'cl100k_base'?" in message


def test_null_text_and_null_encoding_in_rms_token_count(shared_con):
    """SQL-surface review: a NULL text counted as an error when its encoding was NULL too."""
    rows = shared_con.sql("SELECT rms_token_count(t, e) FROM (VALUES ('hi', 'o200k_base'), "
                          "(NULL, NULL), ('a b', 'cl100k_base')) AS v(t, e)").fetchall()
    assert rows == [(1,), (None,), (2,)]
    with pytest.raises(duckdb.Error, match="encoding must name an encoding such as "
                                           "'o200k_base' or 'cl100k_base', got NULL for the "
                                           "text 'hi'; pass one"):
        shared_con.sql("SELECT rms_token_count('hi', NULL)").fetchall()


def test_wrong_field_type_names_the_candidate_and_field():
    with pytest.raises(CandidateError, match=r"candidate #0 \(id 'a'\): field 'pinned' must be "
                                             r"true or false, got 'yes'; cast it to BOOLEAN"):
        rms_duck.pack_candidates([{**GOOD, "pinned": "yes"}], budget=500)
    with pytest.raises(CandidateError, match=r"field 'event_time' must be a timestamp, got "
                                             r"'last tuesday'; pass a TIMESTAMPTZ or ISO-8601"):
        rms_duck.pack_candidates([{**GOOD, "event_time": "last tuesday"}], budget=500)


def test_negative_budget_is_not_an_error():
    bundle = rms_duck.pack_candidates([GOOD], budget=-5)
    assert bundle.flags == ("BUDGET_ERROR",) and bundle.render() == ""
    # The flag said what; the warning says why and what to pass, as NOTHING_FIT's does.
    assert bundle.warnings == ("budget -5 is not a positive number of tokens, so nothing was "
                               "packed (each candidate is excluded with BUDGET_ERROR); pass "
                               "a budget such as 4096",)


def test_a_zero_budget_in_sql_carries_the_warning(shared_con):
    [(flags, warnings)] = shared_con.execute(
        "SELECT b.flags, b.warnings FROM (SELECT pack_context([{'id': 'a', 'score': 0.5, "
        "'content': 'x'}], 0) AS b)").fetchall()
    assert flags == ["BUDGET_ERROR"] and warnings[0].startswith("budget 0 is not a positive")


# -- ranking queries ---------------------------------------------------------------------


@pytest.mark.parametrize("query, phrases", [
    pytest.param("DELETE FROM rms_nodes", ["DELETE statement is not allowed"], id="delete"),
    pytest.param("DROP TABLE rms_nodes", ["DROP", "is not allowed"], id="drop"),
    pytest.param("SELECT 1 AS id; SELECT 2", ["exactly one statement", "got 2"], id="two"),
    pytest.param("SELECT * FROM read_csv('/etc/passwd')", ["read_csv"], id="file"),
    pytest.param("SELECT * INTO t2 FROM rms_nodes", ["INTO"], id="select-into"),
    pytest.param("", ["must be one SELECT statement"], id="empty"),
])
def test_ranking_query_is_rejected_and_nothing_is_stored(shared_con, query, phrases):
    before = count_stored(shared_con)
    with pytest.raises(QueryRejectedError) as raised:
        rms_duck.pack(shared_con, query, budget=500)
    message = str(raised.value)
    for phrase in phrases:
        assert phrase in message
    assert "ranking query" in message
    assert count_stored(shared_con) == before
    assert shared_con.sql("SELECT count(*) FROM rms_nodes").fetchall() == [(0,)]
    assert "t2" not in {r[0] for r in shared_con.sql("SHOW TABLES").fetchall()}


@pytest.mark.parametrize("params", ["abc", b"ab", 5, {"heron", "maya"}])
def test_params_that_are_not_a_list_of_values_are_named(shared_con, params):
    # A str was split into characters, so DuckDB complained of a count mismatch; an int
    # raised TypeError. (A dict binds $name placeholders: test_query_guard.py.)
    with pytest.raises(ConfigError, match=r"params must be a list of values for the query's "
                                          r"\? placeholders \(or a dict for \$name ones\), got "):
        rms_duck.pack(shared_con, "SELECT ? AS id, 0.5 AS score, 'x' AS content",
                      params=params, budget=500)
    assert count_stored(shared_con) == (0, 0)


def test_params_beside_a_table_are_refused_not_ignored(shared_con):
    with pytest.raises(ConfigError, match=r"params fill a ranking query's placeholders, but "
                                          r"candidates is a Table, not a query"):
        rms_duck.pack(shared_con, pa.Table.from_pylist([GOOD]), params=["x"], budget=500)
    assert count_stored(shared_con) == (0, 0)


@pytest.mark.parametrize("kind", ["lone surrogate", "nested too deeply"])
def test_params_beside_a_table_are_refused_before_their_values_are_read(shared_con, kind):
    # The lone-surrogate and depth scan of params ran first: a table packed with
    # params=['\ud800'] was told to fix the text of a value it would never bind.
    value: object = "\ud800"
    if kind == "nested too deeply":
        value = []
        for _ in range(5000):
            value = [value]
    with pytest.raises(ConfigError, match=r"^params fill a ranking query's placeholders, but "
                                          r"candidates is a Table, not a query, so they would "
                                          r"be ignored; leave params out"):
        rms_duck.pack(shared_con, pa.Table.from_pylist([GOOD]), params=[value], budget=500)
    assert count_stored(shared_con) == (0, 0)


@pytest.mark.parametrize(("option", "fix"), [
    # max_rows=1 beside a table of three rows packed all three, without a word.
    ({"max_rows": 1}, "leave max_rows out (to pack fewer rows, slice the table first)"),
    ({"timeout": 5}, "leave timeout out"),
    ({"dialect": "postgres"}, "leave dialect out"),
])
def test_query_limits_beside_a_table_are_refused_not_ignored(shared_con, option, fix):
    table = pa.Table.from_pylist([GOOD, {**GOOD, "id": "b"}, {**GOOD, "id": "c"}])
    [(name, value)] = option.items()
    with pytest.raises(ConfigError) as raised:
        rms_duck.pack(shared_con, table, budget=500, **option)
    assert str(raised.value) == (f"{name} applies to a ranking query, but candidates is a "
                                 f"Table, not a query, so {name}={value!r} would be ignored; "
                                 f"{fix}")
    assert count_stored(shared_con) == (0, 0)


@pytest.mark.parametrize("option", [{"max_rows": 1}, {"timeout": 5}, {"dialect": "postgres"},
                                    {"params": ["x"]}])
def test_rows_of_the_wrong_kind_beside_a_query_option_are_told_how_to_pass_rows(shared_con,
                                                                                option):
    # The query-only refusals ran first: a list of rows beside max_rows=1 was told to leave
    # max_rows out (and slice "the table"), and only then that a list is no table.
    with pytest.raises(CandidateError, match=r"^candidates must be a ranking query string or "
                                             r"an Arrow-capable table .*got list; for Python "
                                             r"rows pass pa.Table.from_pylist\(rows\)"):
        rms_duck.pack(shared_con, [GOOD], budget=500, **option)
    assert count_stored(shared_con) == (0, 0)


def test_candidates_of_the_wrong_kind(shared_con):
    with pytest.raises(CandidateError, match="candidates must be a ranking query string or an "
                                             r"Arrow-capable table .*got list"):
        rms_duck.pack(shared_con, [GOOD], budget=500)


@pytest.mark.parametrize(("kind", "fix"), [
    # Both were told to build rows with pa.Table.from_pylist(rows): no help for either.
    ("polars-lazy", r"got a polars LazyFrame, which holds no rows until it is collected; "
                    r"pass frame.collect\(\)$"),
    ("dict-of-columns", r"for a dict of columns pass pa.table\(columns\); for one record, "
                        r"pa.Table.from_pylist\(\[record\]\)$"),
])
def test_a_lazy_frame_or_a_dict_of_columns_is_told_its_own_fix(shared_con, kind, fix):
    import polars as pl

    given = {"polars-lazy": lambda: pl.DataFrame([GOOD]).lazy(),
             "dict-of-columns": lambda: {name: [value] for name, value in GOOD.items()}}[kind]()
    with pytest.raises(CandidateError, match=fix):
        rms_duck.pack(shared_con, given, budget=500, store=False)


# -- a failed pack stores nothing ----------------------------------------------------------


def count_stored(con) -> tuple[int, int]:
    [(bundles,)] = con.sql("SELECT count(*) FROM rms_bundles").fetchall()
    [(receipts,)] = con.sql("SELECT count(*) FROM rms_receipts").fetchall()
    return bundles, receipts


def test_failed_pack_from_a_query_stores_nothing(con):
    rms_duck.pack(con, pa.Table.from_pylist([GOOD]), budget=500)
    assert count_stored(con) == (1, 1)
    bad_query = ("SELECT * FROM (VALUES ('a', 0.5, 'x'), ('b', NULL, 'y')) "
                 "AS t(id, score, content)")
    with pytest.raises(CandidateError, match=r"candidate #1 \(id 'b'\): field 'score'"):
        rms_duck.pack(con, bad_query, budget=500, store=True)
    with pytest.raises(ConfigError):
        rms_duck.pack(con, pa.Table.from_pylist([GOOD]), budget=500,
                      config={"context_format": "xml"}, store=True)
    assert count_stored(con) == (1, 1)


def test_failure_while_writing_the_receipt_rolls_back_the_bundle(con):
    rms_duck.pack(con, pa.Table.from_pylist([GOOD]), budget=500)
    assert count_stored(con) == (1, 1)
    # Swap rms_receipts for a table whose digest column cannot take the digest, so the
    # second INSERT of the store transaction fails after the bundle row went in.
    con.execute("ALTER TABLE rms_receipts RENAME TO rms_receipts_saved")
    columns = con.sql("SELECT column_name, data_type FROM duckdb_columns() "
                      "WHERE table_name = 'rms_receipts_saved' ORDER BY column_index").fetchall()
    assert ("receipt_sha256", "VARCHAR") in columns
    ddl = ", ".join(f"{name} {'INTEGER' if name == 'receipt_sha256' else kind}"
                    for name, kind in columns)
    con.execute(f"CREATE TABLE rms_receipts ({ddl})")
    with pytest.raises(duckdb.ConversionException):
        rms_duck.pack(con, pa.Table.from_pylist([{**GOOD, "id": "b"}]), budget=500)
    assert count_stored(con) == (1, 0)
    con.execute("DROP TABLE rms_receipts")
    con.execute("ALTER TABLE rms_receipts_saved RENAME TO rms_receipts")
    assert count_stored(con) == (1, 1)
    # The connection is usable again, and the next pack stores both rows.
    rms_duck.pack(con, pa.Table.from_pylist([{**GOOD, "id": "c"}]), budget=500)
    assert count_stored(con) == (2, 2)


@pytest.mark.parametrize("when", ["0001-01-01T00:00:00+05:00", "9999-12-31T23:00:00-05:00"])
def test_a_time_whose_utc_instant_leaves_the_calendar_is_named(when):
    # Valid ISO text whose UTC instant falls before year 1 or after 9999: a CandidateError
    # naming the field, in Python and in SQL, not a bare OverflowError.
    rows = [{"id": "a", "score": 0.5, "content": "x", "event_time": when}]
    message = r"candidate #0 \(id 'a'\): field 'event_time' must be a time whose UTC instant"
    with pytest.raises(CandidateError, match=message):
        rms_duck.pack_candidates(rows, budget=300)
    con = rms_duck.connect()
    with pytest.raises(CandidateError, match=message):
        rms_duck.pack(con, pa.Table.from_pylist(rows), budget=300, store=False)
    with pytest.raises(duckdb.Error, match=message):
        con.execute("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'x', "
                    "'event_time': ?}], 300)", [when]).fetchall()


def test_a_reference_time_whose_utc_instant_leaves_the_calendar_is_named():
    message = (r"config field 'reference_time' must be a time whose UTC instant falls in "
               r"years 1 to 9999, got '0001-01-01T00:00:00\+05:00'")
    config = {"reference_time": "0001-01-01T00:00:00+05:00", "query": "when did it start?"}
    with pytest.raises(ConfigError, match=message):
        rms_duck.pack_candidates([{"id": "a", "score": 0.5, "content": "x"}], budget=300,
                                 config=config)
    con = rms_duck.connect()
    with pytest.raises(duckdb.Error, match=message):
        con.execute("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'x'}], 300, ?)",
                    [json.dumps(config)]).fetchall()


@pytest.mark.parametrize("sql, field, value", [
    # A BIGINT past 32 bits failed with DuckDB's cast error, which names no field.
    ("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'x', "
     "'path_count': 3000000000}], 100)", "path_count", "3000000000"),
    ("SELECT rms_store([{'id': 'a', 'score': 0.5, 'content': 'x', "
     "'token_cost_estimate': -3000000000}], 100)", "token_cost_estimate", "-3000000000"),
    ("SELECT pack_context(list({'id': id, 'score': 0.5, 'content': 'x', "
     "'session_position': p}), 100) FROM (VALUES ('a', 1), ('b', 3000000000)) AS t(id, p)",
     "session_position", "3000000000"),
])
def test_a_sql_whole_field_past_32_bits_is_named_with_its_value(con, sql, field, value):
    with pytest.raises(duckdb.Error, match=rf"field '{field}' must be in .*got {value}") as err:
        con.execute(sql).fetchall()
    assert "candidate #" in str(err.value)
    assert con.execute("SELECT count(*) FROM rms_bundles").fetchall() == [(0,)]


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"database": None}, r"database must be the path of a DuckDB file .* got None; pass"),
    ({"database": b"rms.duckdb"}, r"database must be the path .* got b'rms.duckdb'; pass"),
    ({"read_only": "yes"}, r"read_only must be True or False, got 'yes'; pass read_only=True"),
    ({"read_only": 1}, r"read_only must be True or False, got 1; pass"),
])
def test_connect_names_a_bad_argument_and_the_fix(kwargs, message):
    from rms_duck.errors import DatabaseOpenError

    with pytest.raises(DatabaseOpenError, match=message):
        rms_duck.connect(**kwargs)


def test_connect_takes_a_pathlib_path(tmp_path):
    con = rms_duck.connect(tmp_path / "rms.duckdb")
    assert con.execute("SELECT rms_token_count('hello')").fetchall() == [(1,)]
    con.close()


@pytest.mark.parametrize("kind", ["pandas", "polars", "pyarrow", "dict", "str", "None",
                                  "int"])
def test_pack_candidates_given_a_table_or_one_record_says_what_to_pass(kind):
    """It iterated what it was given: a DataFrame's column names became the records
    ("candidate #0 must be a record (STRUCT or dict), got 'id'"), and None (or any other
    value that is not iterable, such as a count) raised a bare TypeError."""
    import pandas as pd
    import polars as pl

    given = {"pandas": lambda: pd.DataFrame([GOOD]), "polars": lambda: pl.DataFrame([GOOD]),
             "pyarrow": lambda: pa.Table.from_pylist([GOOD]), "dict": lambda: dict(GOOD),
             "str": lambda: "a", "None": lambda: None, "int": lambda: 3}[kind]()
    with pytest.raises(CandidateError, match=r"^candidates must be an iterable of records "
                                             r"\(dicts or Candidates\), got \w+; for a "
                                             r"DataFrame or Arrow table pass "
                                             r"df.to_dict\('records'\) \(polars: "
                                             r"df.to_dicts\(\)\) or table.to_pylist\(\)"):
        rms_duck.pack_candidates(given, budget=300)
    assert rms_duck.pack_candidates(iter([GOOD]), budget=300).included


@pytest.mark.parametrize("kind", ["dask", "polars lazy"])
def test_pack_candidates_given_a_lazy_frame_says_how_to_get_its_records(kind):
    """A Dask DataFrame was told to pass df.to_dict('records'), which it does not have; a
    polars LazyFrame the same, which it lacks too: neither holds rows until computed."""
    import dask.dataframe as dd
    import pandas as pd
    import polars as pl

    given = (dd.from_pandas(pd.DataFrame([GOOD]), npartitions=1) if kind == "dask"
             else pl.DataFrame([GOOD]).lazy())
    fix = (r"ddf.compute\(\).to_dict\('records'\), or pack its groups on the cluster with "
           r"rms_duck.dask.pack_groups" if kind == "dask" else r"frame.collect\(\).to_dicts\(\)")
    with pytest.raises(CandidateError, match=r"got a (Dask DataFrame|polars LazyFrame), which "
                                             rf"holds no rows until it is computed; pass {fix}"):
        rms_duck.pack_candidates(given, budget=300)
    records = (given.compute().to_dict("records") if kind == "dask"
               else given.collect().to_dicts())
    assert rms_duck.pack_candidates(records, budget=300).included


@pytest.mark.parametrize(("given", "stored"), [
    ("2026-09-14T00:00:00+00:00", "2026-09-14T00:00:00+00:00"),
    ("2026-09-14T00:00:00Z", "2026-09-14T00:00:00+00:00"),
    (date(2026, 9, 14), "2026-09-14T00:00:00"),
])
def test_packing_config_takes_the_reference_times_a_dict_config_takes(given, stored):
    # PackingConfig(reference_time="2026-09-14T00:00:00+00:00") was accepted as it was and
    # the pack then failed with AttributeError: 'str' object has no attribute 'tzinfo'.
    config = rms_duck.PackingConfig(reference_time=given)
    bundle = rms_duck.pack_candidates([GOOD], budget=300, config=config)
    assert bundle.receipt_body["config"]["reference_time"] == stored
    assert config == parse_config({"reference_time": given})


@pytest.mark.parametrize("given", ["yesterday", 5])
def test_packing_config_refuses_a_reference_time_that_is_no_time_by_field(given):
    with pytest.raises(ConfigError, match=r"^config field 'reference_time' must be an ISO-8601 "
                                          rf"timestamp such as .*, got {given!r}"):
        rms_duck.PackingConfig(reference_time=given)


@pytest.mark.parametrize(("fields", "lacking", "given"), [
    ("id, content", "field 'score'", "'id', 'content'"),
    ("id", "fields 'score' and 'content'", "'id'"),
    ("content AS body, id, 0.5 AS score", "field 'content'", "'body', 'id', 'score'"),
])
@pytest.mark.parametrize("fn", ["pack_context", "rms_store"])
def test_a_sql_candidate_list_without_a_required_field_names_it(shared_con, fn, fields,
                                                                 lacking, given):
    # DuckDB's cast filled the absent field with NULL, so the error read "field 'score' is
    # required ..., got None (SQL NULL); filter out NULL scores or COALESCE them to 0".
    query = (f"SELECT {fn}(list(c), 500) FROM (SELECT {fields} FROM (VALUES ('a', 'x')) "
             "AS t(id, content)) AS c")
    with pytest.raises(duckdb.InvalidInputException) as raised:
        shared_con.sql(query).fetchall()
    message = str(raised.value)
    assert (f"{UDF_PREFIX}CandidateError: {fn}: the candidates lack the {lacking} (fields "
            f"given: {given}); every candidate needs id, score and content: name them so, "
            f"for example {fn}(list({{'id': node_id, 'score': similarity, 'content': body}}), "
            "4096)") in message
    assert "SQL NULL" not in message
    assert count_stored(shared_con) == (0, 0)


def test_sql_candidate_fields_match_the_required_names_without_regard_to_case(shared_con):
    rows = shared_con.sql("SELECT pack_context([{'ID': 'a', 'Score': 0.5, 'CONTENT': 'x'}], "
                          "500).included").fetchall()
    assert [record["id"] for record in rows[0][0]] == ["a"]


_CON_TAKERS = {
    "rms_duck.pack": lambda con: rms_duck.pack(con, "SELECT 1", budget=300),
    "rms_duck.register": lambda con: rms_duck.register(con),
    "rms_duck.verify_receipts": lambda con: rms_duck.verify_receipts(con),
    "rms_duck.replay": lambda con: rms_duck.replay(con, "00000000-0000-4000-8000-000000000001"),
    "rms_duck.export_heads": lambda con: rms_duck.export_heads(con),
    "rms_duck.write_heads": lambda con: rms_duck.write_heads(con, "heads.json"),
    "rms_duck.check_line_costs": lambda con: rms_duck.check_line_costs(con),
    "rms_duck.refresh_line_costs": lambda con: rms_duck.refresh_line_costs(con),
    "rms_duck.export_line_costs": lambda con: rms_duck.export_line_costs(con, "costs.parquet"),
    "rms_duck.refresh_token_estimates": lambda con: rms_duck.refresh_token_estimates(con),
    "rms_duck.refresh_index": lambda con: rms_duck.refresh_index(con),
    "rms_duck.store_batches": lambda con: rms_duck.store_batches(con, pa.table({"a": [1]})),
    "rms_duck.audit.explain.explain": lambda con: rms_duck.audit.explain.explain(
        con, "00000000-0000-4000-8000-000000000001"),
}


@pytest.mark.parametrize("fn", sorted(_CON_TAKERS))
def test_a_path_given_as_the_connection_says_to_connect_first(fn, tmp_path, monkeypatch):
    # A path (the README's "memory.duckdb") failed deep inside: "cannot create weak
    # reference to 'str' object" from pack, "'str' object has no attribute 'cursor'" from
    # the audits.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as raised:
        _CON_TAKERS[fn]("memory.duckdb")
    assert str(raised.value) == (
        f"{fn}: con must be a DuckDB connection, got str 'memory.duckdb'; open the file "
        f"first: con = rms_duck.connect('memory.duckdb'), then {fn}(con, ...)")
    with pytest.raises(ConfigError, match=rf"^{fn}: con must be a DuckDB connection, got "
                                          r"NoneType None; open one first: con = "
                                          r"rms_duck.connect\('rms.duckdb'\)"):
        _CON_TAKERS[fn](None)
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_a_cursor_is_a_connection_too(shared_con):
    assert rms_duck.verify_receipts(shared_con.cursor()) == []


def test_a_plain_duckdb_connection_is_told_to_register(tmp_path):
    # rms_duck.pack(duckdb.connect(), ...) failed with "Catalog Error: Table with name
    # rms_line_costs does not exist!", which names no fix.
    plain = duckdb.connect()
    # Content no other pack in this process has costed: a cached cost reads no table.
    table = pa.Table.from_pylist([{**GOOD, "content": "never costed before, 41c2d8"}])
    for store in (True, False):
        with pytest.raises(ConfigError, match=r"^rms_duck.pack: this connection is not set up "
                                              r"for rms_duck \(its database has no rms_\* "
                                              r"tables\); open the database with con = "
                                              r"rms_duck.connect\(path\), or call "
                                              r"rms_duck.register\(con\) on it first \(DuckDB "
                                              r"said: Catalog Error: Table with name "
                                              r"rms_\w+ does not exist!\)$"):
            rms_duck.pack(plain, table, budget=300, store=store)
    with pytest.raises(ConfigError, match=r"^rms_duck.refresh_index: this connection is not "
                                          r"set up for rms_duck \(its database has no"):
        rms_duck.refresh_index(plain)
    with pytest.raises(ConfigError, match=r"^rms_duck.replay: this connection is not set up"):
        rms_duck.replay(plain, "00000000-0000-4000-8000-000000000001")
    # It took check_connection beside the others, but not their catalog-error rewrite:
    # "Catalog Error: Table with name rms_lexical_config does not exist!".
    from rms_duck.duck.ranking import set_index_language
    with pytest.raises(ConfigError, match=r"^rms_duck.duck.ranking.set_index_language: this "
                                          r"connection is not set up for rms_duck \(its "
                                          r"database has no"):
        set_index_language(plain, "english")
    assert plain.execute("SELECT count(*) FROM duckdb_tables()").fetchall() == [(0,)]
    rms_duck.register(plain)
    assert rms_duck.pack(plain, table, budget=300).receipt_id is not None


def test_a_plain_connection_to_an_rms_file_is_told_to_register_to_rank(tmp_path):
    path = str(tmp_path / "rms.duckdb")
    rms_duck.connect(path).close()
    plain = duckdb.connect(path)
    with pytest.raises(ConfigError, match=r"^rms_duck.pack: this connection is not set up for "
                                          r"rms_duck \(rms_duck's functions are not "
                                          r"registered on it\); open the database with"):
        rms_duck.pack(plain, "SELECT * FROM rms_candidates(?, ?)", params=["x", None],
                      budget=300)
    # A table packs there as before: only the ranking needs the functions.
    assert rms_duck.pack(plain, pa.Table.from_pylist([GOOD]), budget=300).included
    plain.close()


def test_a_catalog_error_on_a_set_up_connection_is_duckdbs_own():
    con = rms_duck.connect()
    con.execute("DROP TABLE rms_line_costs")  # set up, then damaged: DuckDB's message stands
    unseen = {**GOOD, "content": "a line no pack in this process has costed yet, 7f3e9c"}
    with pytest.raises(duckdb.CatalogException, match="rms_line_costs does not exist"):
        rms_duck.pack(con, pa.Table.from_pylist([unseen]), budget=300, store=False)
    con.close()


@pytest.mark.parametrize(("call", "name"), [
    (lambda con: rms_duck.pack(con, pa.Table.from_pylist([GOOD]), budget=300, store="no"),
     "store"),
    (lambda con: rms_duck.pack_batches(pa.table({"q": [1], "id": ["a"], "score": [0.5],
                                                 "content": ["x"]}), by="q", budget=300,
                                       inputs="yes"), "inputs"),
    (lambda con: rms_duck.refresh_index(con, full="yes"), "full"),
    (lambda con: rms_duck.register(con, replace=1), "replace"),
    (lambda con: rms_duck.write_heads(con, "heads.json", verify_first="no"), "verify_first"),
])
def test_a_flag_given_as_text_or_a_number_is_refused_by_name(call, name, tmp_path,
                                                             monkeypatch):
    # store="no" read as true: the bundle was stored, the opposite of what was asked.
    monkeypatch.chdir(tmp_path)
    con = rms_duck.connect()
    with pytest.raises(ConfigError, match=rf"^{name} must be True or False, got .*; pass "
                                          rf"{name}="):
        call(con)
    assert count_stored(con) == (0, 0)
    assert list(tmp_path.iterdir()) == []
    con.close()


@pytest.mark.parametrize(("row", "message"), [
    ({"id": "a", "content": "x"}, "candidate #0 (id 'a'): field 'score' is required but "
                                  "missing (keys given: 'id', 'content')"),
    ({"id": "a"}, "candidate #0 (id 'a'): fields 'score' and 'content' are required but "
                  "missing (keys given: 'id')"),
    ({}, "candidate #0: fields 'id', 'score' and 'content' are required but missing (keys "
         "given: none)"),
])
def test_a_dict_without_a_required_key_says_it_is_missing(row, message):
    # A dict (or an rms-duck pack line) without "score" was told "got None (SQL NULL);
    # filter out NULL scores or COALESCE them to 0": SQL advice for a key it never had.
    with pytest.raises(CandidateError) as raised:
        rms_duck.pack_candidates([GOOD, row], budget=300)
    assert str(raised.value) == (
        message.replace("#0", "#1") + "; every candidate needs id, score and content: add "
        "them, for example {'id': 'n1', 'score': 0.9, 'content': '...'}")


def test_a_dict_whose_score_is_none_is_still_a_null_one():
    with pytest.raises(CandidateError, match=r"field 'score' is required and must be a number "
                                             r"in \[0, 1\], got None \(SQL NULL\)"):
        rms_duck.pack_candidates([{**GOOD, "score": None}], budget=300)


def test_a_counter_that_is_no_line_counter_is_named():
    # counter="o200k_base" failed with "'str' object has no attribute 'encoding'".
    with pytest.raises(ConfigError) as raised:
        rms_duck.pack_candidates([GOOD], budget=300, counter="o200k_base")
    assert str(raised.value) == (
        "counter must be a rms_duck.tokens.counter.LineCounter or None, got str 'o200k_base'; "
        "pass counter=LineCounter('o200k_base'), or set the encoding with "
        "config={'encoding': ...}")


def test_a_misspelt_packing_config_keyword_is_named_as_in_a_dict_config():
    # PackingConfig(context_fromat="reader") raised Python's TypeError "__init__() got an
    # unexpected keyword argument 'context_fromat'", where the dict config says what to use.
    with pytest.raises(ConfigError) as by_keyword:
        rms_duck.PackingConfig(context_fromat="reader")
    with pytest.raises(ConfigError) as by_dict:
        parse_config({"context_fromat": "reader"})
    assert str(by_keyword.value) == str(by_dict.value)
    assert str(by_keyword.value).startswith("unknown config field 'context_fromat'. Did you "
                                            "mean 'context_format'? Known fields: ")
    with pytest.raises(ConfigError, match="unknown config field 'formt'"):
        rms_duck.PackingConfig().with_changes(formt="compact")


@pytest.mark.parametrize(("row", "fix"), [
    ({"id": "a", "scroe": 0.5, "content": "x"}, "rename 'scroe' to 'score'"),
    ({"ID": "a", "score": 0.5, "text": "x"}, "rename 'ID' to 'id', and add 'content'"),
    ({"id": "a", "Score": 0.5, "contents": "x"},
     "rename 'Score' to 'score' and 'contents' to 'content'"),
    # One key is renamed to one field, its closest: 'scontent' was told to become both
    # 'score' and 'content'.
    ({"id": "a", "scontent": "x"}, "rename 'scontent' to 'content', and add 'score'"),
])
def test_a_misspelt_required_key_is_named_with_its_rename(row, fix):
    # The keys were listed, but a key spelt 'scroe' or 'ID' is easy to read past.
    with pytest.raises(CandidateError) as raised:
        rms_duck.pack_candidates([row], budget=300)
    assert str(raised.value).endswith(f"every candidate needs id, score and content: {fix}")


def test_register_on_a_read_only_database_without_the_schema_says_so(tmp_path):
    # rms_duck.register(duckdb.connect(path, read_only=True)) failed with "Catalog Error:
    # Type with name rms_candidate does not exist!"; connect(path, read_only=True) says why.
    from rms_duck.errors import DatabaseOpenError

    path = str(tmp_path / "plain.duckdb")
    duckdb.connect(path).close()
    plain = duckdb.connect(path, read_only=True)
    with pytest.raises(DatabaseOpenError, match=r"^this connection's database has no rms_duck "
                                                r"schema and is open read-only, so it cannot be "
                                                r"set up; open it writable once with "
                                                r"rms_duck.connect\(path\)"):
        rms_duck.register(plain)
    plain.close()
    rms_duck.connect(path).close()  # set up once, writable: then read-only registers
    rms_duck.register(duckdb.connect(path, read_only=True)).close()


def test_a_sql_candidate_field_spelt_close_to_a_required_one_is_named_with_its_rename(
        shared_con):
    with pytest.raises(duckdb.InvalidInputException) as raised:
        shared_con.sql("SELECT pack_context([{'id': 'a', 'scroe': 0.5, 'contnet': 'x'}], "
                       "500)").fetchall()
    assert ("pack_context: the candidates lack the fields 'score' and 'content' (fields given: "
            "'id', 'scroe', 'contnet'); every candidate needs id, score and content: rename "
            "'scroe' to 'score' and 'contnet' to 'content'") in str(raised.value)
    # A field with no close name was left out of the fix ("rename 'scroe' to 'score'"
    # alone), where a table's and a dict's messages say to add it too.
    with pytest.raises(duckdb.InvalidInputException) as raised:
        shared_con.sql("SELECT pack_context([{'id': 'a', 'scroe': 0.5, 'body': 'x'}], "
                       "500)").fetchall()
    assert ("every candidate needs id, score and content: rename 'scroe' to 'score', and add "
            "'content' too") in str(raised.value)


@pytest.mark.parametrize(("columns", "fix"), [
    (["id", "scroe", "content"], "rename 'scroe' to 'score'"),
    (["id", "Scroe", "text"], "rename 'Scroe' to 'score', and select 'content' too"),
    (["id", "relevance", "body"], "select them under those names, for example SELECT node_id "
                                  "AS id, similarity AS score, body AS content"),
])
def test_a_table_column_spelt_close_to_a_required_one_is_named_with_its_rename(
        shared_con, columns, fix):
    table = pa.table({name: [value] for name, value in zip(columns, ["a", 0.5, "x"],
                                                            strict=True)})
    with pytest.raises(CandidateError) as raised:
        rms_duck.pack(shared_con, table, budget=500, store=False)
    assert str(raised.value).endswith(f"every candidate needs id, score and content: {fix}")

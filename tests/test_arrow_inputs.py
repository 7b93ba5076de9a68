"""pack() takes any Arrow-capable table, and ranking queries see connection-local objects.

Reproductions from the newcomer review (#14, #15, #16) and the ecosystem review
(DataFrames into rms_duck.pack()), with the real pandas, polars and DuckDB.
"""

from __future__ import annotations

from datetime import UTC, datetime

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import rms_duck
from rms_duck.duck.api import _run_read_only
from rms_duck.duck.types import bundle_row
from rms_duck.errors import CandidateError, QueryRejectedError

ROWS = [
    {"id": "n1", "score": 0.91, "content": "The Heron cut-over moved to 2026-12-19.",
     "speaker": "Maya", "event_time": datetime(2026, 11, 30, 9, 0, tzinfo=UTC), "type": "fact",
     "confidence": 0.9},
    {"id": "n2", "score": 0.55, "content": "Rollback keeps the old cluster read-only.",
     "speaker": None, "event_time": None, "type": "note", "confidence": 0.5},
    {"id": "n3", "score": 0.12, "content": "Lunch is at noon.", "speaker": "Ari",
     "event_time": datetime(2026, 11, 2, 12, 0, tzinfo=UTC), "type": "event",
     "confidence": 0.6},
]
CONFIG = {"query": "When is the Heron cut-over?", "context_format": "auditable"}


class CapsuleOnly:
    """Exposes nothing but the Arrow PyCapsule stream protocol."""

    def __init__(self, table: pa.Table) -> None:
        self._table = table

    def __arrow_c_stream__(self, requested_schema=None):
        return self._table.__arrow_c_stream__(requested_schema)


@pytest.fixture(scope="module")
def mcon():
    con = rms_duck.connect()
    yield con
    con.close()


@pytest.fixture(scope="module")
def expected(mcon):
    return bundle_row(rms_duck.pack(mcon, pa.Table.from_pylist(ROWS), budget=400,
                                    config=CONFIG, store=False))


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["pandas", "polars", "relation", "capsule", "batch", "reader"])
def test_every_arrow_capable_input_gives_the_arrow_bundle(mcon, expected, kind):
    table = pa.Table.from_pylist(ROWS)
    data = {
        "pandas": lambda: pd.DataFrame(ROWS),
        "polars": lambda: pl.DataFrame(ROWS),
        "relation": lambda: mcon.from_arrow(table),
        "capsule": lambda: CapsuleOnly(table),
        "batch": lambda: table.to_batches()[0],
        "reader": lambda: pa.RecordBatchReader.from_batches(table.schema, table.to_batches()),
    }[kind]()
    bundle = rms_duck.pack(mcon, data, budget=400, config=CONFIG, store=False)
    assert bundle_row(bundle) == expected
    assert len(bundle.included) == 3


def test_a_pandas_frame_packs_and_stores_with_a_receipt(mcon):
    bundle = rms_duck.pack(mcon, pd.DataFrame(ROWS), budget=400, config=CONFIG)
    assert bundle.receipt_id is not None
    assert rms_duck.replay(mcon, bundle.receipt_id).identical


def test_ranking_query_reads_a_registered_dataframe(mcon, expected):
    mcon.register("cands_pd", pd.DataFrame(ROWS))
    try:
        bundle = rms_duck.pack(mcon, "SELECT * FROM cands_pd", budget=400, config=CONFIG,
                               store=False)
    finally:
        mcon.unregister("cands_pd")
    assert bundle_row(bundle) == expected


def test_ranking_query_reads_temp_tables_and_views(mcon, expected):
    mcon.register("src", pd.DataFrame(ROWS))
    mcon.execute("CREATE OR REPLACE TEMP TABLE tmp_cands AS SELECT * FROM src")
    mcon.execute("CREATE OR REPLACE TEMP VIEW tmp_view AS SELECT * FROM tmp_cands")
    mcon.unregister("src")
    for sql in ("SELECT * FROM tmp_cands", "SELECT v.* FROM tmp_view AS v",
                "WITH c AS (SELECT * FROM temp.main.tmp_cands) SELECT * FROM c"):
        bundle = rms_duck.pack(mcon, sql, budget=400, config=CONFIG, store=False)
        assert bundle_row(bundle) == expected, sql
    stored = rms_duck.pack(mcon, "SELECT * FROM tmp_cands", budget=400, config=CONFIG)
    assert stored.receipt_id is not None


def test_queries_over_temp_objects_are_still_guarded(mcon):
    mcon.execute("CREATE OR REPLACE TEMP TABLE guarded AS SELECT 'x' AS id, 0.5 AS score, "
                 "'text' AS content")
    with pytest.raises(QueryRejectedError, match="DELETE"):
        rms_duck.pack(mcon, "DELETE FROM guarded", budget=400)
    with pytest.raises(QueryRejectedError, match="read_csv"):
        rms_duck.pack(mcon, "SELECT * FROM guarded, read_csv('x.csv')", budget=400)


def test_the_connection_path_runs_in_a_read_only_transaction(mcon):
    with pytest.raises(duckdb.Error, match="read-only"):
        _run_read_only(mcon, "INSERT INTO rms_line_costs VALUES ('e', 'x', 1)", None,
                       on_connection=True)
    assert mcon.execute("SELECT count(*) FROM rms_line_costs WHERE encoding = 'e'"
                        ).fetchall() == [(0,)]


def test_a_temp_query_inside_an_open_transaction_says_what_to_do(mcon):
    mcon.execute("CREATE OR REPLACE TEMP TABLE busy AS SELECT 'x' AS id, 0.5 AS score, "
                 "'text' AS content")
    mcon.execute("BEGIN TRANSACTION")
    try:
        mcon.execute("INSERT INTO busy VALUES ('y', 0.4, 'uncommitted')")
        with pytest.raises(QueryRejectedError, match="COMMIT or ROLLBACK it"):
            rms_duck.pack(mcon, "SELECT * FROM busy", budget=400, store=False)
        # The caller's transaction is intact, not aborted by a BEGIN inside it: its row is
        # still there (an aborted one refuses this query, and its COMMIT drops the row).
        assert mcon.execute("SELECT count(*) FROM busy").fetchall() == [(2,)]
    finally:
        mcon.execute("ROLLBACK")


@pytest.mark.slow
def test_storing_on_a_read_only_file_suggests_store_false(tmp_path):
    path = str(tmp_path / "ro.duckdb")
    rms_duck.connect(path).close()
    ro = rms_duck.connect(path, read_only=True)
    try:
        with pytest.raises(rms_duck.RmsError, match="open read-only; pass store=False"):
            rms_duck.pack(ro, pa.Table.from_pylist(ROWS), budget=400)
        assert rms_duck.pack(ro, pd.DataFrame(ROWS), budget=400, store=False).included
    finally:
        ro.close()


def test_an_unregistered_dataframe_name_is_rejected_with_the_fix(mcon):
    # newcomer review #16: the message read "...; name an existing table, view or CTE is
    # not allowed in ..."
    with pytest.raises(QueryRejectedError) as caught:
        rms_duck.pack(mcon, "SELECT * FROM pdf", budget=400)
    message = str(caught.value)
    assert "'pdf' in 'SELECT * FROM pdf' is not a table, view or CTE" in message
    assert "con.register(name, dataframe)" in message and "is not allowed in" not in message


def test_a_ranking_query_reads_an_attached_databases_table_by_its_short_name(tmp_path):
    """FROM d.notes is DuckDB's short form of d.main.notes; the guard refused it (stop 23's
    input review: only d.main.notes passed). A schema of that name still resolves too."""
    path = str(tmp_path / "data.duckdb")
    data = duckdb.connect(path)
    data.execute("CREATE TABLE notes AS SELECT 'a' AS id, 0.5 AS score, 'from d' AS content")
    data.execute("CREATE SCHEMA side")
    data.execute("CREATE TABLE side.notes AS SELECT 'b' AS id, 0.5 AS score, 'side' AS content")
    data.close()
    con = rms_duck.connect()
    try:
        con.execute(f"ATTACH '{path}' AS d (READ_ONLY)")
        short = rms_duck.pack(con, "SELECT id, score, content FROM d.notes", budget=400,
                              store=False)
        full = rms_duck.pack(con, "SELECT id, score, content FROM d.main.notes", budget=400,
                             store=False)
        assert short.context == full.context and '"from d"' in short.context
        side = rms_duck.pack(con, "SELECT * FROM d.side.notes", budget=400, store=False)
        assert '"side"' in side.context
        with pytest.raises(QueryRejectedError, match="'d.elsewhere' in"):
            rms_duck.pack(con, "SELECT * FROM d.elsewhere", budget=400, store=False)
    finally:
        con.close()


@pytest.mark.parametrize("through", ["sql", "arrow"])
def test_rows_whose_required_fields_are_all_null_are_rejected_not_dropped(mcon, through):
    """When every row's id, score and content were NULL, the column checks kept no column
    and the row loop ran over none: the pack said NO_CANDIDATES instead of naming the field."""
    from rms_duck.errors import CandidateError

    with pytest.raises((CandidateError, duckdb.InvalidInputException),
                       match="candidate #0: field 'id' is required"):
        if through == "sql":
            mcon.sql("SELECT pack_context(list({'id': NULL::VARCHAR, 'score': NULL::DOUBLE, "
                     "'content': NULL::VARCHAR}), 100) FROM range(2)").fetchall()
        else:
            table = pa.table({"id": pa.array([None, None], pa.string()),
                              "score": pa.array([None, None], pa.float64()),
                              "content": pa.array([None, None], pa.string())})
            rms_duck.pack(mcon, table, budget=100, store=False)


@pytest.mark.parametrize("kind", ["query", "pyarrow", "pandas", "pack_batches"])
def test_a_table_without_a_required_column_is_refused_by_column(mcon, kind):
    """Was the first row's "field 'id' is required, got None", which hid that the query or
    table has no such column at all (newcomer slip: SELECT node_id, ... without AS id)."""
    from rms_duck.errors import CandidateError

    rows = [{"node_id": "n1", "Score": 0.5, "content": "x"}]
    stored = mcon.execute("SELECT count(*) FROM rms_receipts").fetchall()
    with pytest.raises(CandidateError) as raised:
        if kind == "query":
            rms_duck.pack(mcon, "SELECT 'n1' AS node_id, 0.5 AS Score, 'x' AS content",
                          budget=300, store=False)
        elif kind == "pack_batches":
            rms_duck.pack_batches(pa.Table.from_pylist([{**rows[0], "q": 1}]), by="q",
                                  budget=300)
        else:
            table = pa.Table.from_pylist(rows)
            rms_duck.pack(mcon, table.to_pandas() if kind == "pandas" else table,
                          budget=300)
    message = str(raised.value)
    # Score feeds score (names match without regard to case, as in SQL): only id lacks.
    assert message.startswith("the candidate rows lack the column 'id' (columns "
                              "given: 'node_id', 'Score', 'content"), message
    assert "SELECT node_id AS id" in message
    assert mcon.execute("SELECT count(*) FROM rms_receipts").fetchall() == stored


@pytest.mark.parametrize("index", ["id", ["ID", "speaker"]])
def test_a_required_field_in_the_pandas_index_is_named_as_the_index(mcon, index):
    """df.set_index("id") gave "the candidate rows lack the column 'id' (columns given:
    'score', 'content', ...)" and the fix "SELECT node_id AS id", while the frame plainly
    shows its ids: the index is never read, so the error says so and how to fix it."""
    from rms_duck.errors import CandidateError

    frame = pd.DataFrame(ROWS).rename(columns={"id": "ID"} if index != "id" else {})
    frame = frame.set_index(index)
    for call in (lambda: rms_duck.pack(mcon, frame, budget=300, store=False),
                 lambda: rms_duck.pack_batches(frame.assign(q=1), by="q", budget=300)):
        with pytest.raises(CandidateError, match=r"the DataFrame's 'id' is its index \('(id|ID)'"
                                                 r"\), .*; make it a column first: "
                                                 r"df.reset_index\(\)"):
            call()
    assert rms_duck.pack(mcon, frame.reset_index(), budget=300, store=False).included


@pytest.mark.parametrize("repeated", ["content", "q"])
def test_a_pandas_column_name_given_twice_is_named_with_the_fix(repeated):
    """pandas allows two columns named content; Arrow refused them and the error advised
    df['content'].astype(str), which changes nothing. A repeated name no field reads is
    still left out, as before."""
    from rms_duck.errors import CandidateError

    frame = pd.DataFrame(ROWS).assign(q=1, other=2)
    frame = pd.concat([frame, frame[[repeated]], frame[["other"]]], axis=1)
    with pytest.raises(CandidateError, match=rf"^the DataFrame has more than one column named "
                                             rf"'{repeated}' \(columns given: .*\); keep one: "
                                             r"df = df.loc\[:, ~df.columns.duplicated\(\)\]"):
        rms_duck.pack_batches(frame, by="q", budget=300)
    fine = frame.loc[:, ~frame.columns.duplicated() | (frame.columns == "other")]
    assert rms_duck.pack_batches(fine, by="q", budget=300).num_rows == 1


def test_a_group_key_in_the_pandas_index_is_named_as_the_index():
    """pack_batches(df.set_index("q"), by="q") said "group key column 'q' is not in the
    table (columns: id, score, content)"."""
    from rms_duck.errors import CandidateError

    frame = pd.DataFrame(ROWS).assign(q=[1, 1, 2]).set_index("q")
    with pytest.raises(CandidateError, match=r"the DataFrame's 'q' is its index \('q'\)"):
        rms_duck.pack_batches(frame, by="q", budget=300)
    packed = rms_duck.pack_batches(frame.reset_index(), by="q", budget=300)
    assert packed.column("q").to_pylist() == [1, 2]


@pytest.mark.parametrize("kind", ["query", "pyarrow", "pandas", "polars", "pack_batches"])
def test_column_names_match_candidate_fields_without_regard_to_case(mcon, kind):
    """As pack_context's STRUCT cast does in SQL: a Snowflake-style ranking query's ID,
    SCORE and CONTENT (or a DataFrame's Id column) were refused by the Python entry points
    ("rename 'ID' to 'id'"), while pack_context took the same names."""
    rows = [{"Id": f"n{i}", "SCORE": 0.5 + i / 10, "Content": f"note {i}", "Speaker": "Ana",
             "EVENT_TIME": datetime(2024, 5, i + 1, 9, 30, tzinfo=UTC)} for i in range(3)]
    canonical = [{k.lower(): v for k, v in row.items()} for row in rows]
    expected = rms_duck.pack(mcon, pa.Table.from_pylist(canonical), budget=300, store=False)
    sql = mcon.execute(
        "SELECT b.context FROM (SELECT pack_context(list(r), 300) AS b FROM "
        "(SELECT 'n' || i AS Id, 0.5 + i / 10 AS SCORE, 'note ' || i AS Content, 'Ana' AS "
        "Speaker, TIMESTAMPTZ '2024-05-01 09:30:00+00' + to_days(i::INT) AS EVENT_TIME "
        "FROM range(3) t(i)) r)").fetchall()[0][0]
    assert sql == expected.context and '"note 2"' in sql and "1 May" in sql
    if kind == "query":
        got = rms_duck.pack(mcon, "SELECT 'n' || i AS Id, 0.5 + i / 10 AS SCORE, 'note ' || i "
                            "AS Content, 'Ana' AS Speaker, TIMESTAMPTZ '2024-05-01 09:30:00+00'"
                            " + to_days(i::INT) AS EVENT_TIME FROM range(3) t(i)", budget=300,
                            store=False).context
    elif kind == "pack_batches":
        table = pa.Table.from_pylist([{**row, "Q": 1} for row in rows])
        got = rms_duck.pack_batches(table, by="Q", budget=300).column("context")[0].as_py()
    else:
        table = pa.Table.from_pylist(rows)
        data = {"pyarrow": table, "pandas": table.to_pandas(),
                "polars": pl.from_arrow(table)}[kind]
        got = rms_duck.pack(mcon, data, budget=300, store=False).context
    assert got == expected.context


@pytest.mark.parametrize("kind", ["query", "pyarrow", "pack_batches"])
def test_columns_of_one_field_in_two_cases_are_refused(mcon, kind):
    from rms_duck.errors import CandidateError

    with pytest.raises(CandidateError, match="columns 'id', 'ID' for field 'id' .*rename or "
                       r"drop the other, for example df.rename\(columns=\{'ID': 'node_id'\}\)"):
        if kind == "query":
            rms_duck.pack(mcon, "SELECT 'a' AS id, 'b' AS \"ID\", 0.5 AS score, 'x' AS content",
                          budget=300, store=False)
        elif kind == "pack_batches":
            rms_duck.pack_batches(pa.Table.from_pylist(
                [{"q": 1, "id": "a", "ID": "b", "score": 0.5, "content": "x"}]), by="q",
                budget=300)
        else:
            rms_duck.pack(mcon, pa.Table.from_pylist(
                [{"id": "a", "ID": "b", "score": 0.5, "content": "x"}]), budget=300,
                store=False)


@pytest.mark.parametrize("kind", ["query", "pyarrow", "pack_batches"])
def test_two_columns_of_one_candidate_field_are_refused(mcon, kind):
    """Input review F1: SELECT *, 1 - score AS score gave two score columns; rms_duck.pack
    used the last, SQL's subquery the first (it renames the second score_1), and
    pack_batches raised a bare KeyError."""
    from rms_duck.errors import CandidateError

    table = pa.table([pa.array(["a"]), pa.array([0.9]), pa.array(["x"]), pa.array([0.1])],
                     names=["id", "score", "content", "score"])
    with pytest.raises(CandidateError, match=r"the candidate rows have 2 columns named 'score' "
                       r"\(columns given: 'id', 'score', 'content', 'score'.*\); give each "
                       r"column its own name, for example SELECT \* EXCLUDE \(score\), \.\.\. "
                       r"AS score"):
        if kind == "query":
            rms_duck.pack(mcon, "SELECT 'a' AS id, 0.9 AS score, 'x' AS content, "
                          "0.1 AS score", budget=300, store=False)
        elif kind == "pack_batches":
            rms_duck.pack_batches(table.append_column("q", pa.array([1])), by="q", budget=300)
        else:
            rms_duck.pack(mcon, table, budget=300, store=False)


def test_only_ascii_case_is_folded_as_duckdb_folds_it():
    """DuckDB's STRUCT cast does not match a Kelvin sign for a k (Python's lower() does)."""
    from rms_duck.columnar import candidate_field

    assert candidate_field("TOKEN_COST_ESTIMATE") == "token_cost_estimate"
    assert candidate_field("TO\u212aEN_COST_ESTIMATE") is None
    assert candidate_field("\u0130D") is None and candidate_field("node_id") is None
    duck = duckdb.connect()
    with pytest.raises(duckdb.BinderException, match="at least one matching member"):
        duck.execute("SELECT CAST([{'TO\u212aEN_COST_ESTIMATE': 5}] AS "
                     "STRUCT(token_cost_estimate INT)[])")
    matched = duck.execute("SELECT CAST([{'TOKEN_COST_ESTIMATE': 5}] AS "
                           "STRUCT(token_cost_estimate INT)[])").fetchall()[0][0][0]
    assert list(matched.values()) == [5]


def test_a_group_key_feeds_a_candidate_field_only_when_named_exactly():
    """by='Type' (or ID, Session_ID) stays a key alone, as before names matched without
    regard to case; a key named exactly like a field (session_id) still feeds it
    (review of stop 24: by='Type' with values email/chat was refused as a node type)."""
    rows = [{"id": "a", "score": 0.5, "content": "first"},
            {"id": "b", "score": 0.4, "content": "second"}]
    by_type = rms_duck.pack_batches(pa.Table.from_pylist(
        [{**row, "Type": kind} for row, kind in zip(rows, ["email", "chat"], strict=True)]),
        by="Type", budget=300)
    assert by_type.column("Type").to_pylist() == ["chat", "email"]
    by_id = rms_duck.pack_batches(pa.Table.from_pylist([{**row, "ID": row["id"]} for row in rows]),
                                  by="ID", budget=300)
    assert by_id.num_rows == 2
    from rms_duck.errors import CandidateError

    with pytest.raises(CandidateError, match="a group key feeds a field only when named "
                                             "exactly, so rename 'ID' to 'id'"):
        rms_duck.pack_batches(pa.Table.from_pylist([{"ID": "a", "score": 0.5, "content": "x"}]),
                              by="ID", budget=300)
    for key, feeds in (("session_id", True), ("Session_ID", False)):
        table = pa.Table.from_pylist([{**row, key: "s1"} for row in rows])
        inputs = rms_duck.pack_batches(table, by=key, budget=300, inputs=True)
        assert ('"session_id":"s1"' in inputs.column("inputs")[0].as_py()) is feeds, key


@pytest.mark.parametrize("field", ["paths", "evidence_ids", "contradicts"])
def test_a_number_column_for_a_list_field_is_read_as_a_dict_row_reads_it(con, field):
    """A float column named paths raised TypeError: 'float' object is not iterable. Its NaN is
    now missing (NULL) and its number a value to refuse, as in the same rows as dicts."""
    from rms_duck.errors import CandidateError

    rows = [{"id": "a", "score": 0.5, "content": "x", field: float("nan")}]
    by_table = rms_duck.pack(con, pa.Table.from_pylist(rows), budget=300, store=False)
    assert by_table.context == rms_duck.pack_candidates(rows, budget=300).context
    numbered = [{**rows[0], field: 1.0}]
    message = rf"candidate #0 \(id 'a'\): field '{field}' must be a list, got 1.0"
    with pytest.raises(CandidateError, match=message):
        rms_duck.pack(con, pa.Table.from_pylist(numbered), budget=300, store=False)
    with pytest.raises(CandidateError, match=message):
        rms_duck.pack_candidates(numbered, budget=300)


@pytest.mark.parametrize("kind", ["polars_lazy", "dask"])
def test_a_lazy_frame_is_named_with_the_call_that_gives_rows(mcon, kind):
    """A Dask DataFrame was refused as "got DataFrame", which reads as accepted, and a polars
    LazyFrame as not being among the inputs "(pyarrow, pandas, polars, ...)"."""
    frame = pd.DataFrame(ROWS).assign(q=1)
    if kind == "dask":
        dd = pytest.importorskip("dask.dataframe")
        lazy, fix = dd.from_pandas(frame, npartitions=1), "ddf.compute()"
        named = "a Dask DataFrame, which holds no rows until it is computed"
    else:
        lazy, fix = pl.from_pandas(frame).lazy(), "frame.collect()"
        named = "a polars LazyFrame, which holds no rows until it is collected"
    with pytest.raises(CandidateError, match="candidates must be") as packed:
        rms_duck.pack(mcon, lazy, budget=400, store=False)
    with pytest.raises(CandidateError, match="table must be Arrow data") as batched:
        rms_duck.pack_batches(lazy, by="q", budget=400)
    for raised in (packed, batched):
        assert named in str(raised.value) and fix in str(raised.value)
    if kind == "dask":
        assert "rms_duck.dask.pack_groups(ddf" in str(batched.value)


@pytest.mark.parametrize("store", [True, False])
def test_a_plain_duckdb_connection_is_named_with_register_as_the_fix(store):
    """A notebook's con = duckdb.connect() (not rms_duck.connect()) got DuckDB's "Catalog
    Error: Table with name rms_line_costs does not exist!", store=False too."""
    from rms_duck.errors import ConfigError
    from rms_duck.tokens.counter import clear_line_cache

    clear_line_cache()  # cold, as in a new notebook: the pack looks its lines up
    con = duckdb.connect()
    try:
        with pytest.raises(ConfigError, match=r"^rms_duck.pack: this connection is not set up "
                           r"for rms_duck .* rms_duck\.register\(con\)"):
            rms_duck.pack(con, pd.DataFrame(ROWS), budget=400, store=store)
        assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchall() == [(0,)]
        rms_duck.register(con)  # the fix works
        assert rms_duck.pack(con, pd.DataFrame(ROWS), budget=400, store=store).included
    finally:
        con.close()


def test_a_relation_over_a_stale_index_is_not_told_that_pack_refreshes_it():
    """pack(con, con.sql("SELECT * FROM rms_candidates(...)")) failed with "run
    rms_duck.refresh_index(con) (rms_duck.pack() does it for you ...)": it was pack() that
    ran it, and pack() refreshes the index before query text only."""
    con = rms_duck.connect()
    try:
        con.execute("INSERT INTO rms_nodes (id, content) VALUES (uuid(), 'Heron cut-over')")
        sql = "SELECT * FROM rms_candidates('heron')"
        with pytest.raises(duckdb.InvalidInputException) as raised:
            rms_duck.pack(con, con.sql(sql), budget=300, store=False)
        message = str(raised.value)
        assert "the lexical index is out of date (1 of 1 nodes not indexed" in message
        assert "a relation runs as it was built: pass the query text instead" in message
        assert "does it for you" not in message
        assert rms_duck.pack(con, sql, budget=300, store=False).included  # the first fix
    finally:
        con.close()

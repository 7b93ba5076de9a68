"""pack_batches(): Arrow in, Arrow out, byte-equal to DuckDB's GROUP BY; line costs that
travel as Parquet; store_batches() back into one store with a verifiable chain."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import rms_duck
from rms_duck.bench.simulate import _candidate
from rms_duck.bench.workload import BULK_PACK_SQL, make_bulk_tables
from rms_duck.errors import CandidateError, ConfigError, ReceiptError
from rms_duck.formats.base import clear_render_memos
from rms_duck.packing.arrowtype import BUNDLE_FIELDS
from rms_duck.receipts import RECEIPT_VERSION
from rms_duck.tokens.costfile import LineCosts, line_sha256
from rms_duck.tokens.counter import LineCounter, clear_line_cache

from .conftest import node_id, rows

BENCH_COLUMNS = "q, id, score, content, event_time, speaker"


def bench_candidates(con, groups: int) -> pa.Table:
    make_bulk_tables(con, bundles=groups, per_bundle=8, nodes=groups, seed=0)
    return con.sql(f"SELECT {BENCH_COLUMNS} FROM bench_candidates WHERE q < ?",
                   params=[groups]).to_arrow_table()


def sql_bundles(con, groups: int, budget: int = 512) -> list[dict]:
    """SELECT q, pack_context(list(...), budget) ... GROUP BY q, one dict per group."""
    sql = f"SELECT q, to_json(bundle)::VARCHAR AS j FROM ({BULK_PACK_SQL}) ORDER BY q"
    return [{"q": q, **json.loads(j)} for q, j in con.execute(sql, [budget, groups]).fetchall()]


def batch_bundles(table: pa.Table) -> list[dict]:
    return json.loads(json.dumps(table.to_pylist()))


def test_pack_batches_gives_the_group_by_bytes(con):
    table = bench_candidates(con, 120)
    out = rms_duck.pack_batches(table, by="q", budget=512)
    assert out.column_names == ["q", *BUNDLE_FIELDS]
    assert batch_bundles(out) == sql_bundles(con, 120)


def rich_table(groups: int, seed: int = 3) -> pa.Table:
    """simulate.py's candidates (every field, conflicts, sessions, hostile text), two keys."""
    rng = random.Random(seed)
    out = []
    for g in range(groups):
        ids = [str(rng.getrandbits(64)) for _ in range(rng.choice((0, 1, 3, 8, 20)))]
        for node in ids:
            row = _candidate(rng, node, ids)
            if "structured_value" in row:
                row["structured_value"] = json.dumps(row["structured_value"])
            out.append({"tenant": f"t{g % 3}", "turn": g, **row})
    # Every key in every row: from_pylist takes its columns from the first row alone.
    keys = list(dict.fromkeys(key for row in out for key in row))
    return pa.Table.from_pylist([{key: row.get(key) for key in keys} for row in out])


@pytest.mark.parametrize("config", [
    {"context_format": "reader", "context_citations": True, "context_guidance_mode": "all",
     "query": "When did the meeting move?", "session_context_packing": "adjacent"},
    {"context_format": "compact", "multipath_ordering": "density", "overhead_tokens": 0},
])
def test_rich_candidates_and_two_keys_match_duckdb(con, config):
    table = rich_table(150)
    con.register("cands", table)
    fields = [n for n in table.column_names if n not in ("tenant", "turn")]
    struct = ", ".join(f"'{n}': {n}" for n in fields)
    got = con.execute(
        f"SELECT tenant, turn, to_json(pack_context(list({{{struct}}}), 700, ?::JSON))::VARCHAR "
        "FROM cands GROUP BY tenant, turn ORDER BY tenant, turn", [json.dumps(config)]).fetchall()
    expected = [{"tenant": t, "turn": n, **json.loads(j)} for t, n, j in got]
    out = rms_duck.pack_batches(table, by=["tenant", "turn"], budget=700, config=config)
    assert batch_bundles(out) == expected


def test_groups_come_sorted_by_key_with_the_null_group_last():
    table = pa.Table.from_pylist([{"g": g, **row} for g, row in zip(
        ["b", None, "a", "b", None], rows(5), strict=True)])
    out = rms_duck.pack_batches(table, by="g", budget=300)
    assert out.column("g").to_pylist() == ["a", "b", None]
    by_group = {g: len(inc) for g, inc in zip(out.column("g").to_pylist(),
                                              out.column("included").to_pylist(), strict=True)}
    assert by_group == {"a": 1, "b": 2, None: 2}


def test_row_order_chunking_and_input_kind_do_not_change_the_bytes(con):
    table = bench_candidates(con, 40)
    out = rms_duck.pack_batches(table, by="q", budget=512)
    shuffled = table.take(pa.array(random.Random(1).sample(range(len(table)), len(table))))
    chunked = pa.Table.from_batches(shuffled.to_batches(max_chunksize=7))
    assert rms_duck.pack_batches(chunked, by="q", budget=512).equals(out)
    assert rms_duck.pack_batches(table.to_pandas(), by="q", budget=512).equals(out)
    batch = table.combine_chunks().to_batches()[0]
    assert rms_duck.pack_batches(batch, by="q", budget=512).equals(out)


def test_nan_keys_form_one_group_as_in_duckdb(con):
    table = pa.table({"q": [1.0, float("nan"), None, float("nan"), None, 2.0, float("inf")],
                      "id": list("abcdefg"), "score": [0.9, 0.4, 0.7, 0.5, 0.5, 0.5, 0.5],
                      "content": [f"record {c}" for c in "abcdefg"]})
    con.register("nan_keys", table)
    expected = con.sql("SELECT q, pack_context(list(r), 300).context FROM nan_keys AS r "
                       "GROUP BY q ORDER BY q NULLS LAST").fetchall()
    out = rms_duck.pack_batches(table, by="q", budget=300)
    got = list(zip(out.column("q").to_pylist(), out.column("context").to_pylist(), strict=True))
    assert [(repr(q), c) for q, c in got] == [(repr(q), c) for q, c in expected]
    assert len(got) == 5


def test_polars_text_columns_pack_as_their_pyarrow_equivalent(con):
    # polars hands text over as string_view, which pyarrow can neither sort nor take.
    import polars as pl

    table = pa.Table.from_pylist([
        {"g": g, "paths": [["VECTOR"], ["VECTOR", "LEXICAL"], None][i % 3], **row}
        for i, (g, row) in enumerate(zip(["b", None, "a", "b", None, "a"], rows(6),
                                         strict=True))])
    frame = pl.from_arrow(table)
    assert pa.types.is_string_view(pa.table(frame).schema.field("g").type)
    expected = rms_duck.pack_batches(table, by="g", budget=300)
    got = rms_duck.pack_batches(frame, by="g", budget=300)
    assert got.column("g").to_pylist() == ["a", "b", None]
    assert got.drop_columns(["g"]).equals(expected.drop_columns(["g"]))
    by_query = rms_duck.pack(con, frame, budget=300, store=False)
    assert by_query.context == rms_duck.pack(con, table, budget=300, store=False).context


def test_nanosecond_pandas_times_match_microsecond_ones():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(rows(3))
    frame["g"] = 1
    frame["event_time"] = pd.to_datetime(["2024-05-01T10:00:00Z"] * 3).as_unit("ns")
    micro = frame.assign(event_time=frame["event_time"].dt.as_unit("us"))
    assert rms_duck.pack_batches(frame, by="g", budget=300).equals(
        rms_duck.pack_batches(micro, by="g", budget=300))
    frame.loc[1, "event_time"] += pd.Timedelta(1, "ns")
    # The value and its candidate are named, as every other path names them.
    with pytest.raises(CandidateError, match=r"'event_time' holds times with nanoseconds, "
                       r"such as 2024-05-01 10:00:00\.000000001\+00:00 \(candidate id "
                       + repr(frame.loc[1, "id"]) + r" in the group g=1\)"):
        rms_duck.pack_batches(frame, by="g", budget=300)


def test_output_schema_is_what_pack_batches_returns(con):
    from rms_duck.packing.batches import output_schema

    table = bench_candidates(con, 3)
    for inputs in (False, True):
        out = rms_duck.pack_batches(table, by="q", budget=512, inputs=inputs)
        assert out.schema == output_schema([table.schema.field("q")], inputs=inputs)


def test_pandas_nat_times_are_null_times():
    """Ecosystem review: building LIST<STRUCT> from pandas rows by hand failed on NaT."""
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(rows(3)).assign(g=1, event_time=pd.to_datetime(
        ["2024-05-01T10:00:00Z", None, "2024-05-02T10:00:00Z"]))
    assert frame["event_time"].isna().sum() == 1
    out = rms_duck.pack_batches(frame, by="g", budget=300)
    records = frame.astype(object).where(frame.notna(), None).to_dict("records")
    expected = rms_duck.pack_candidates(records, budget=300)
    assert out.column("context").to_pylist() == [expected.context]


def test_empty_table_gives_an_empty_result_with_the_schema():
    table = pa.Table.from_pylist(rows(1)).append_column("q", pa.array([1])).slice(0, 0)
    out = rms_duck.pack_batches(table, by="q", budget=300, inputs=True)
    assert out.num_rows == 0
    assert out.column_names == ["q", *BUNDLE_FIELDS, "inputs"]


def test_inputs_column_is_what_pack_stores(con):
    candidates = rows(6)
    table = pa.Table.from_pylist([{"q": 1, **row} for row in candidates])
    out = rms_duck.pack_batches(table, by="q", budget=300, inputs=True)
    rms_duck.pack(con, pa.Table.from_pylist(candidates), budget=300)
    [(stored,)] = con.execute("SELECT inputs::VARCHAR FROM rms_bundles").fetchall()
    assert out.column("inputs").to_pylist() == [stored]


@pytest.mark.parametrize("kwargs, error, message", [
    ({"by": "nope"}, ConfigError, "group key column 'nope' is not in the table"),
    ({"by": []}, ConfigError, "by must name the group key column"),
    ({"by": "context"}, ConfigError, "'context' has the name of a bundle field"),
    ({"by": "q", "budget": "lots"}, ConfigError, "budget must be a whole number"),
    ({"by": "q", "config": {"context_fromat": "reader"}}, ConfigError,
     "Did you mean 'context_format'"),
    ({"by": "q", "line_costs": 42}, ConfigError, "line_costs must be a LineCosts or the path"),
    ({"by": "q", "line_costs": "/nonexistent/costs.parquet"}, ConfigError,
     "line_costs file '/nonexistent/costs.parquet' cannot be read"),
    ({"by": "tags"}, ConfigError, "'tags' has type list<item: string>; group by scalar"),
    # Two columns named q came out, which store_batches could not sort (ArrowInvalid).
    ({"by": ["q", "q"]}, ConfigError, r"by names the key column 'q' twice; name it once"),
])
def test_bad_arguments_name_the_field_and_the_fix(kwargs, error, message):
    table = pa.Table.from_pylist([{"q": 1, "context": "x", "tags": ["a"], **rows(1)[0]}])
    with pytest.raises(error, match=message):
        rms_duck.pack_batches(table, **{"budget": 300, **kwargs})


def test_bad_tables_and_candidates_are_named():
    with pytest.raises(CandidateError, match="table must be Arrow data .* got int"):
        rms_duck.pack_batches(7, by="q", budget=300)
    no_content = pa.Table.from_pylist([{"q": 1, "id": "a", "score": 0.5}])
    with pytest.raises(CandidateError, match=r"the candidate rows lack the column 'content' "
                       r"\(columns given: 'q', 'id', 'score'\)"):
        rms_duck.pack_batches(no_content, by="q", budget=300)
    bad = pa.Table.from_pylist([{"q": 1, **row} for row in rows(3)] + [
        {"q": 2, "id": "x", "score": 3.0, "content": "too high"}])
    with pytest.raises(CandidateError, match="candidate #0 .*field 'score' must be a number"):
        rms_duck.pack_batches(bad, by="q", budget=300)


def test_a_bad_line_cost_file_is_named(tmp_path):
    path = tmp_path / "costs.parquet"
    path.write_bytes(b"not parquet")
    table = pa.Table.from_pylist([{"q": 1, **rows(1)[0]}])
    with pytest.raises(ConfigError, match="is not a line-cost Parquet file"):
        rms_duck.pack_batches(table, by="q", budget=300, line_costs=str(path))


def _nodes_store(con, n: int) -> pa.Table:
    """n nodes in rms_nodes, their line costs refreshed; candidates for n // 8 groups."""
    con.executemany(
        "INSERT INTO rms_nodes (id, content, speaker, event_time) VALUES (?, ?, ?, ?)",
        [[node_id(i), f"note {i}: the {i % 7} review moved to room {i % 11}",
          "Ann" if i % 3 else None, datetime(2024, 1, 1 + i % 28, tzinfo=UTC)]
         for i in range(n)])
    rms_duck.refresh_line_costs(con, processes=1)
    return con.sql(
        "SELECT (row_number() OVER (ORDER BY id)) // 8 AS q, id::VARCHAR AS id, "
        "0.5::DOUBLE AS score, content, type, namespace_id, epistemic_type, source_type, "
        "lifecycle_state, confidence, event_time, speaker FROM rms_nodes").to_arrow_table()


@pytest.mark.slow  # 4-5 s: the default run stays under 3 minutes
def test_exported_line_costs_spare_the_tokenizer(con, tmp_path):
    table = _nodes_store(con, 160)
    path = tmp_path / "costs.parquet"
    # Each node's line, and for the 106 with a speaker its line under a speaker line too.
    assert rms_duck.export_line_costs(con, str(path)) == 160 + 106
    stored = set(con.execute("SELECT line_sha256 FROM rms_line_costs").fetchall())
    stored = {digest for (digest,) in stored}

    def tokenized(**kwargs) -> tuple[list[str], pa.Table]:
        clear_line_cache()
        clear_render_memos()
        out = rms_duck.pack_batches(table, by="q", budget=400, processes=1, **kwargs)
        return list(LineCounter()._cache), out  # the process cache holds what was encoded

    cold, expected = tokenized()
    warm, out = tokenized(line_costs=str(path))
    assert out.equals(expected)
    assert not {line_sha256(line) for line in warm} & stored  # nothing stored was re-encoded
    assert len(warm) < len(cold) - 150
    # A LineCosts object works too; rows of another encoding key are not read.
    assert rms_duck.pack_batches(table, by="q", budget=400,
                                 line_costs=LineCosts.read(path)).equals(expected)
    con.execute("UPDATE rms_line_costs SET encoding = 'o200k_base:0000000000000000'")
    rms_duck.export_line_costs(con, str(path))
    assert (len(LineCosts.read(path)), len(LineCosts.read(path, encoding="cl100k_base"))) == \
        (0, 0)


def _packed(con, groups: int = 30) -> pa.Table:
    table = bench_candidates(con, groups)
    return rms_duck.pack_batches(table, by="q", budget=512, inputs=True)


def test_store_batches_chains_in_key_order_and_verifies(con):
    packed = _packed(con)
    rms_duck.pack(con, pa.Table.from_pylist(rows(3)), budget=300)  # an existing chain tip
    shuffled = packed.take(pa.array(random.Random(2).sample(range(30), 30)))
    stored = rms_duck.store_batches(con, shuffled)
    assert stored.column("q").to_pylist() == list(range(30))
    assert stored.column("seq").to_pylist() == list(range(2, 32))
    assert rms_duck.verify_receipts(con) == []
    rid = stored.column("receipt_id")[7].as_py()
    assert rms_duck.replay(con, rid).identical
    contexts = dict(con.execute(
        "SELECT r.seq, b.context FROM rms_receipts r JOIN rms_bundles b USING (bundle_id)"
    ).fetchall())
    assert [contexts[s] for s in range(2, 32)] == packed.column("context").to_pylist()


def test_store_batches_follows_each_bundles_namespace(con):
    table = pa.Table.from_pylist([{"q": q, **row, "namespace_id": f"ns{q % 2}"}
                                  for q in range(4) for row in rows(2)])
    packed = rms_duck.pack_batches(table, by="q", budget=300, inputs=True)
    frame = packed.to_pandas()
    frame.index = [7, 7, 3, 3]  # as concatenated partitions leave it: never a key
    stored = rms_duck.store_batches(con, frame)
    assert stored.select(["q", "chain_namespace", "seq"]).to_pylist() == [
        {"q": 0, "chain_namespace": "ns0", "seq": 1}, {"q": 1, "chain_namespace": "ns1", "seq": 1},
        {"q": 2, "chain_namespace": "ns0", "seq": 2}, {"q": 3, "chain_namespace": "ns1", "seq": 2}]
    assert rms_duck.verify_receipts(con) == []


def test_store_batches_refuses_edited_or_incomplete_rows(con):
    packed = _packed(con, 4)
    with pytest.raises(ConfigError, match="needs column 'inputs'.*pack with inputs=True"):
        rms_duck.store_batches(con, packed.drop_columns(["inputs"]))
    with pytest.raises(ConfigError, match="by names column 'nope'"):
        rms_duck.store_batches(con, packed, by="nope")
    contexts = packed.column("context").to_pylist()
    contexts[2] = contexts[2].replace("a", "b", 1)
    edited = packed.set_column(packed.column_names.index("context"), "context",
                               pa.array(contexts))
    with pytest.raises(ReceiptError, match=r"bundle of q=2: its columns \(context, context_sha"):
        rms_duck.store_batches(con, edited)

    def changed(column, change):
        values = packed.column(column).to_pylist()
        change(values)
        return packed.set_column(packed.column_names.index(column), column,
                                 pa.array(values, packed.schema.field(column).type))

    def swap(values):
        values[1], values[2] = values[2], values[1]

    def bump(values):
        values[1] += 1

    def flag(values):
        values[1] = [*values[1], "BUDGET_OVERFLOW"]

    def drop(values):
        values[1] = values[1][1:]

    def rescore(values):
        rows = json.loads(values[1])
        rows[0]["score"] = rows[0]["score"] / 2
        values[1] = json.dumps(rows, sort_keys=True, separators=(",", ":"), ensure_ascii=False)

    # Rows that would be sealed yet never replay, or fail verify forever: refused, and
    # nothing of their batch is stored.
    for column, change, message in (
            ("inputs", swap, "its inputs are not the candidates its receipt records"),
            ("inputs", rescore, "its inputs are not the candidates"),
            ("context_budget", bump, "its columns"), ("flags", flag, "its columns"),
            ("excluded", drop, "its columns")):
        with pytest.raises(ReceiptError, match=message):
            rms_duck.store_batches(con, changed(column, change))
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]
    rms_duck.store_batches(con, packed)
    assert rms_duck.verify_receipts(con) == []


def test_store_batches_stores_nothing_when_a_later_batch_holds_a_bad_row(con, monkeypatch):
    # A scheduled job that fails on row 1,200 of 1,500 left the first 1,000 stored; fixing
    # the row and running again stored those 1,000 a second time.
    monkeypatch.setattr("rms_duck.duck.batchstore.BATCH_ROWS", 2)
    packed = _packed(con, 5)
    contexts = packed.column("context").to_pylist()
    contexts[3] += "edited"
    edited = packed.set_column(packed.column_names.index("context"), "context",
                               pa.array(contexts))
    with pytest.raises(ReceiptError, match=r"bundle of q=3: .*nothing was stored"):
        rms_duck.store_batches(con, edited)
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]
    stored = rms_duck.store_batches(con, packed)
    assert stored.column("seq").to_pylist() == [1, 2, 3, 4, 5]
    assert rms_duck.verify_receipts(con) == []


@pytest.mark.parametrize("processes", [1, 2])
def test_a_bad_candidate_is_named_by_its_groups_key(monkeypatch, processes):
    # One node is a candidate of many queries, so "the candidate list whose smallest id is
    # 'n1'" fit every group here; the key says which one to fix.
    from rms_duck.packing import parallel
    for name in ("MIN_BUNDLES", "MIN_BUNDLES_STARTED", "MIN_CANDIDATES",
                 "MIN_CANDIDATES_STARTED"):
        monkeypatch.setattr(parallel, name, 4)  # so that processes=2 sends a share out
    table = [{"q": f"query {q}", "day": q % 2, "id": f"n{i}", "score": 0.5,
              "content": f"note {i}"} for q in range(12) for i in range(1, 4)]
    table[3 * 9 + 1]["content"] = None
    with pytest.raises(CandidateError) as caught:
        rms_duck.pack_batches(pa.Table.from_pylist(table), by=["q", "day"], budget=300,
                              processes=processes)
    assert str(caught.value).endswith(
        "(in the group q='query 9', day=1: the candidate list whose smallest id is 'n1')")
    assert "field 'content' is required text" in str(caught.value)


def test_a_key_column_of_null_type_is_one_null_group():
    # An all-NULL key (DuckDB's `NULL AS tenant`, a pandas column of None) has Arrow type
    # null, which Arrow cannot compare: pack_batches raised ArrowNotImplementedError.
    candidates = {"id": ["a", "b", "c"], "score": [0.9, 0.5, 0.1], "content": ["x", "y", "z"]}
    typed = rms_duck.pack_batches(pa.table({"q": pa.nulls(3, pa.int64()), **candidates}),
                                  by="q", budget=300)
    untyped = rms_duck.pack_batches(pa.table({"q": pa.nulls(3), **candidates}), by="q",
                                    budget=300)
    assert untyped.column("q").type == pa.null()
    assert untyped.drop_columns(["q"]).equals(typed.drop_columns(["q"]))
    two = rms_duck.pack_batches(pa.table({"q": [2, 1, 2], "tenant": pa.nulls(3), **candidates}),
                                by=["q", "tenant"], budget=300)
    assert two.select(["q", "tenant"]).to_pylist() == [{"q": 1, "tenant": None},
                                                      {"q": 2, "tenant": None}]


def test_import_rms_duck_packing_stays_free_of_pyarrow():
    code = ("import sys, rms_duck, rms_duck.packing, rms_duck.dask; "
            "print(sorted(m for m in ('pyarrow', 'duckdb', 'dask') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_bundle_fields_name_the_arrow_type_and_the_sql_type_in_order():
    from rms_duck.duck.types import BUNDLE_SQL_TYPE
    from rms_duck.packing.arrowtype import bundle_arrow_type

    assert BUNDLE_FIELDS == tuple(field.name for field in bundle_arrow_type())
    assert [BUNDLE_SQL_TYPE.find(f"{name} ") for name in BUNDLE_FIELDS] == sorted(
        BUNDLE_SQL_TYPE.find(f"{name} ") for name in BUNDLE_FIELDS)


@pytest.mark.parametrize("kind", ["pandas", "polars", "arrow",
                                  pytest.param("dask", marks=pytest.mark.slow)])
def test_categorical_group_keys_group_by_value_as_sql_does(kind):
    """Input review F2: a dictionary-encoded key (a pandas or polars categorical) failed
    with ArrowNotImplementedError; DuckDB's GROUP BY groups the same frame by value."""
    import pandas as pd

    frame = pd.DataFrame({
        "q": pd.Categorical(["y", "x", "x", "y", "z"], categories=["z", "y", "x"]),
        "id": [f"n{i}" for i in range(5)], "score": [0.9, 0.4, 0.7, 0.2, 0.5],
        "content": [f"note {i} about the release" for i in range(5)]})
    con = rms_duck.connect()
    con.register("frame", frame)
    expected = con.execute("SELECT CAST(q AS VARCHAR), pack_context(list({'id': id, "
                           "'score': score, 'content': content}), 300).context FROM frame "
                           "GROUP BY q ORDER BY CAST(q AS VARCHAR)").fetchall()
    con.close()
    if kind == "dask":
        dd = pytest.importorskip("dask.dataframe")
        from rms_duck.dask import pack_groups

        out = pack_groups(dd.from_pandas(frame, npartitions=2), by="q", budget=300).compute()
        got = sorted((str(q), context) for q, context in zip(out["q"], out["context"],
                                                              strict=True))
    else:
        if kind == "polars":
            import polars as pl
            table = pl.from_pandas(frame)
        elif kind == "arrow":
            table = pa.Table.from_pandas(frame, preserve_index=False)
            assert pa.types.is_dictionary(table.schema.field("q").type)
        else:
            table = frame
        out = rms_duck.pack_batches(table, by="q", budget=300)
        got = list(zip(out.column("q").to_pylist(), out.column("context").to_pylist(),
                       strict=True))
    assert got == expected


def test_line_cost_export_and_refresh_arguments_get_clear_errors(con, tmp_path):
    """From the ecosystem review: export_line_costs to a folder raised Arrow's OSError and a
    failed write could leave a file; refresh_line_costs(formats='reader') read the text as
    the formats 'r', 'e', ...; pack_batches(by=None) raised a bare TypeError."""
    from rms_duck.errors import ConfigError

    con.execute("INSERT INTO rms_nodes (id, content) VALUES (uuid(), 'the review moved')")
    first = rms_duck.refresh_line_costs(con, formats="reader", processes=1)
    assert (first.lines, first.stored) == (1, 1)
    assert rms_duck.refresh_line_costs(con, formats=("reader",), processes=1).loaded == 1
    with pytest.raises(ConfigError, match=r"is a folder; pass the Parquet file to write"):
        rms_duck.export_line_costs(con, str(tmp_path))
    missing = tmp_path / "no" / "costs.parquet"
    with pytest.raises(ConfigError, match=r"cannot write line costs to .*costs\.parquet"):
        rms_duck.export_line_costs(con, str(missing))
    assert list(tmp_path.iterdir()) == []  # nothing half-written
    assert rms_duck.export_line_costs(con, str(tmp_path / "costs.parquet")) == 1
    assert [p.name for p in tmp_path.iterdir()] == ["costs.parquet"]
    with pytest.raises(ConfigError, match=r"by must name the group key column\(s\), got None"):
        rms_duck.pack_batches(pa.table({"id": ["a"], "score": [1.0], "content": ["x"]}),
                              by=None, budget=300)


def test_by_takes_any_iterable_of_names_as_before():
    """by=None became a ConfigError by accepting only a list or tuple of names, which also
    refused a DataFrame's columns (pd.Index) and a numpy array that pack_batches took."""
    import numpy as np
    import pandas as pd

    table = pa.table({"q": [1, 1, 2], "id": ["a", "b", "c"], "score": [0.5, 0.4, 0.3],
                      "content": ["one note", "two notes", "three notes"]})
    expected = rms_duck.pack_batches(table, by=["q"], budget=300, processes=1)
    for by in (pd.Index(["q"]), np.array(["q"]), (name for name in ["q"])):
        assert rms_duck.pack_batches(table, by=by, budget=300, processes=1).equals(expected)


def test_store_batches_skip_stored_finishes_an_interrupted_run(con, monkeypatch):
    """A run killed after its first batches kept them; running the same table again stored
    them a second time. With skip_stored=True only the rest is stored, and the chain is one
    unbroken run in key order, as one uninterrupted call would have made it."""
    monkeypatch.setattr("rms_duck.duck.batchstore.BATCH_ROWS", 4)
    packed = _packed(con, 10)
    # What a run interrupted after its first two batches leaves: their rows, in key order.
    rms_duck.store_batches(con, packed.filter(pc.less(packed.column("q"), 8)))
    stored = rms_duck.store_batches(con, packed, skip_stored=True)
    assert stored.select(["q", "seq"]).to_pylist() == [{"q": 8, "seq": 9}, {"q": 9, "seq": 10}]
    assert rms_duck.verify_receipts(con) == []
    contexts = [row[0] for row in con.execute(
        "SELECT b.context FROM rms_receipts r JOIN rms_bundles b USING (bundle_id) "
        "ORDER BY r.seq").fetchall()]
    assert contexts == packed.column("context").to_pylist()
    # Nothing left to store: a third run stores nothing and returns the key columns only.
    again = rms_duck.store_batches(con, packed, skip_stored=True)
    assert again.num_rows == 0 and again.column_names == stored.column_names
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(10,)]


def test_skip_stored_counts_copies_and_keeps_chains_apart(con):
    """One stored copy serves one row: a table holding the same bundle twice stores the
    second copy. A bundle stored in another chain (namespace=) is not this chain's."""
    packed = _packed(con, 2)
    twice = pa.concat_tables([packed, packed.slice(0, 1)])
    rms_duck.store_batches(con, packed.slice(0, 1))
    stored = rms_duck.store_batches(con, twice, skip_stored=True)
    assert stored.column("q").to_pylist() == [0, 1]
    other = rms_duck.store_batches(con, packed, namespace="elsewhere", skip_stored=True)
    assert other.select(["q", "chain_namespace", "seq"]).to_pylist() == [
        {"q": 0, "chain_namespace": "elsewhere", "seq": 1},
        {"q": 1, "chain_namespace": "elsewhere", "seq": 2}]
    assert rms_duck.verify_receipts(con) == []


def test_skip_stored_skips_only_a_bundle_whose_receipt_is_stored(con):
    """A pack with another overhead_tokens or ordering can give the same context from the
    same inputs; its receipt (config, available) is another one, which the store does not
    hold: skip_stored left such rows out, and their receipts were never stored anywhere."""
    table = pa.Table.from_pylist([{"q": q, "id": f"n{i}", "score": 0.5,
                                   "content": f"Fact number {i} about Lisbon."}
                                  for q in (1, 2) for i in range(3)])
    first = rms_duck.pack_batches(table, by="q", budget=400, inputs=True)
    rms_duck.store_batches(con, first)
    for config in ({"overhead_tokens": 50}, {"multipath_ordering": "score"}):
        other = rms_duck.pack_batches(table, by="q", budget=400, config=config, inputs=True)
        assert other.column("context").equals(first.column("context"))
        stored = rms_duck.store_batches(con, other, skip_stored=True)
        assert stored.column("q").to_pylist() == [1, 2], config
    assert rms_duck.store_batches(con, other, skip_stored=True).num_rows == 0
    assert sorted(row[0] for row in con.execute(
        "SELECT available FROM rms_bundles").fetchall()) == [300] * 4 + [350] * 2
    assert rms_duck.verify_receipts(con) == []


def test_skip_stored_runs_at_once_store_each_bundle_once(con, monkeypatch):
    """Two threads storing the same table with skip_stored=True: each read what the store
    held before either wrote, found nothing, and both stored every row (known since stop
    36). The stored copies are now read inside the append's transaction, under the lock
    that queues appends, so the second finds the first's rows and stores none of them."""
    import threading

    from rms_duck.duck import batchstore

    packed = _packed(con, 6)
    real = batchstore._held
    rival_done = threading.Event()
    rival_result: list[pa.Table] = []

    def rival() -> None:
        cur = con.cursor()
        try:
            rival_result.append(rms_duck.store_batches(cur, packed, skip_stored=True))
        finally:
            cur.close()
            rival_done.set()

    calls = {"n": 0}

    def racing_held(cur, rows):
        found = real(cur, rows)
        calls["n"] += 1
        if calls["n"] == 1:
            # The rival starts between this thread's read and its write. Where the read
            # is under the append lock, the rival waits for it, and this wait times out.
            threading.Thread(target=rival, daemon=True).start()
            rival_done.wait(1.0)
        return found

    monkeypatch.setattr(batchstore, "_held", racing_held)
    mine = rms_duck.store_batches(con, packed, skip_stored=True)
    assert rival_done.wait(30)
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(6,)]
    assert mine.num_rows + rival_result[0].num_rows == 6
    assert rms_duck.verify_receipts(con) == []


def _packed_by_release(con, groups: int | pa.Table, version: int) -> pa.Table:
    """_packed's table as the release of receipt `version` (6 or 7) wrote it: packed with
    that release's reader (its frozen copy here) and recording "reader", its version number
    and, before version 7, candidates without has_content."""
    from rms_duck.escape import canonical_json

    table = bench_candidates(con, groups) if isinstance(groups, int) else groups
    packed = rms_duck.pack_batches(table, by="q", budget=512, inputs=True,
                                   config={"context_format": f"reader@{version}"})
    receipts = []
    for text in packed.column("receipt").to_pylist():
        body = json.loads(text)
        body["receipt_version"] = version
        body["config"]["context_format"] = "reader"
        for candidate in body["candidates"] if version < 7 else ():
            del candidate["has_content"]
        receipts.append(canonical_json(body))
    return packed.set_column(packed.column_names.index("receipt"), "receipt",
                             pa.array(receipts))


def test_a_table_packed_by_the_previous_release_stores_with_its_receipt_version(con):
    """Packed on workers still running the release of receipt version 6 and stored by this
    one: the receipt_version column said 7 (the version then) beside a receipt recording 6, and
    verify called
    every row edited (FIELD_MISMATCH). A version this release cannot replay is refused."""
    rms_duck.store_batches(con, _packed_by_release(con, 3, 6))
    assert con.execute("SELECT DISTINCT receipt_version FROM rms_receipts").fetchall() == [(6,)]
    assert rms_duck.verify_receipts(con) == []
    assert con.execute("SELECT count(*) FILTER (WHERE reproduced) FROM rms_replay()"
                       ).fetchall() == [(3,)]
    packed = _packed(con, 3)
    receipts = packed.column("receipt").to_pylist()
    assert all(f'"receipt_version":{RECEIPT_VERSION},' in text for text in receipts)
    for version in (str(RECEIPT_VERSION + 1), "0", f'"{RECEIPT_VERSION}"'):
        newer = packed.set_column(packed.column_names.index("receipt"), "receipt", pa.array(
            [text.replace(f'"receipt_version":{RECEIPT_VERSION},', f'"receipt_version":{version},')
             for text in receipts]))
        with pytest.raises(ReceiptError, match=r"receipt_version .* this rms_duck stores "
                                               rf"versions 1 to {RECEIPT_VERSION}.*"
                                               r"\(nothing was stored\)"):
            rms_duck.store_batches(con, newer)
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(3,)]


def test_skip_stored_finishes_a_run_the_previous_release_began(con):
    """Interrupted while storing the previous releases' receipts, run again after the
    upgrade: a bundle re-packed the same (context, inputs, config, budget, decisions) now
    records this version and is not stored a second time; one whose reader bytes this
    release changed (version 8's speaker lines) is a new bundle, and is stored."""
    table = bench_candidates(con, 12)
    # Groups 0 and 3 are one speaker's records of one day: a run this release names once.
    # Groups 1 and 4 are undated and name no speaker: their bytes are what they were.
    q_type = table.schema.field("q").type
    for groups, values in (([0, 3], {"speaker": "Alice",
                                     "event_time": table.column("event_time")[0].as_py()}),
                           ([1, 4], {"speaker": None, "event_time": None})):
        chosen = pc.is_in(table.column("q"), pa.array(groups, q_type))
        for name, value in values.items():
            column = table.column(name)
            table = table.set_column(table.column_names.index(name), name, pc.if_else(
                chosen, pa.scalar(value, column.type), column))
    for version in (6, 7):
        con.execute("DELETE FROM rms_receipts; DELETE FROM rms_bundles")
        older = _packed_by_release(con, table, version)
        rms_duck.store_batches(con, older.filter(pc.less(older.column("q"), 6)))
        packed = rms_duck.pack_batches(table, by="q", budget=512, inputs=True)
        changed = [q for q, old, new in zip(packed.column("q").to_pylist(),
                                            older.column("context").to_pylist(),
                                            packed.column("context").to_pylist(), strict=True)
                   if q < 6 and old != new]
        assert {0, 3} <= set(changed) and not {1, 4} & set(changed)
        stored = rms_duck.store_batches(con, packed, skip_stored=True)
        assert stored.column("q").to_pylist() == changed + list(range(6, 12)), version
        assert con.execute("SELECT receipt_version FROM rms_receipts ORDER BY seq"
                           ).fetchall() == [(version,)] * 6 + [(RECEIPT_VERSION,)] * (
                               len(changed) + 6)
        assert rms_duck.verify_receipts(con) == []


@pytest.mark.parametrize("edit, shown", [
    (lambda body: body.pop("config"), "field 'config' must be an object"),
    (lambda body: body.update(config="x"), "field 'config' must be an object"),
    (lambda body: body["config"].pop("context_format"), "field 'config' must be an object"),
    (lambda body: body.pop("available"), "field 'available' must be a whole number"),
    (lambda body: body.update(metrics=5), "field 'metrics' must be an object"),
])
def test_a_receipt_edited_in_the_table_is_named_not_a_crash(con, edit, shown):
    """A receipt whose config, available or metrics was edited (its context still agreeing)
    failed with a bare KeyError or AttributeError."""
    packed = _packed(con, 2)
    body = json.loads(packed.column("receipt")[1].as_py())
    edit(body)
    receipts = packed.column("receipt").to_pylist()
    receipts[1] = json.dumps(body)
    edited = packed.set_column(packed.column_names.index("receipt"), "receipt",
                               pa.array(receipts))
    with pytest.raises(ReceiptError, match=rf"bundle of q=1: its receipt's {shown}.*"
                                           r"\(nothing was stored\)"):
        rms_duck.store_batches(con, edited)
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]


def test_skip_stored_must_be_a_bool(con):
    with pytest.raises(ConfigError, match=r"skip_stored must be True or False, got 'yes'; "
                                          r"pass skip_stored=True"):
        rms_duck.store_batches(con, _packed(con, 1), skip_stored="yes")
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]


@pytest.mark.parametrize("value", ["2", 0, -1, 1.5, True])
def test_a_processes_count_that_is_no_whole_number_from_1_is_named(value):
    # processes="2" failed deep in the pool with "unsupported operand type(s) for -: 'str'
    # and 'int'", and only for a batch large enough to share; a small one took it silently.
    table = pa.table({"q": [1], "id": ["a"], "score": [0.5], "content": ["x"]})
    message = (rf"^processes must be a whole number >= 1 or None, got {value!r}; pass None "
               r"for every core, or 1 to stay in this process$")
    with pytest.raises(ConfigError, match=message):
        rms_duck.pack_batches(table, by="q", budget=300, processes=value)
    con = rms_duck.connect()
    with pytest.raises(ConfigError, match=message):
        rms_duck.refresh_line_costs(con, processes=value)
    with pytest.raises(ConfigError, match=rf"^threshold_chars must be a whole number >= 1 or "
                                          rf"None, got {value!r}"):
        rms_duck.refresh_line_costs(con, threshold_chars=value)
    con.close()


@pytest.mark.parametrize("given", [["q"], "q", [pa.field("q", pa.int64()), "day"], 3])
def test_output_schema_given_names_says_to_pass_fields(given):
    # ["q"] failed in pyarrow: "Cannot convert str to pyarrow.lib.Field".
    from rms_duck.packing.batches import output_schema

    with pytest.raises(ConfigError, match=r"^output_schema key_fields must be pyarrow fields "
                                          r"\(each key column's name and type\), got .*; pass "
                                          r"for example \[pa.field\('q', pa.int64\(\)\)\]"):
        output_schema(given)


def test_output_schema_takes_a_field_a_list_or_a_schema_as_pack_batches_returns_it():
    from rms_duck.packing.batches import output_schema

    table = pa.table({"q": [1], "id": ["a"], "score": [0.5], "content": ["x"]})
    returned = rms_duck.pack_batches(table, by="q", budget=300).schema
    for given in (table.schema.field("q"), [table.schema.field("q")],
                  pa.schema([table.schema.field("q")])):
        assert output_schema(given) == returned


def test_output_schema_keeps_the_key_fields_of_a_generator():
    # The check for names read the generator to its end, so the key fields were left out
    # without a word: output_schema(schema.field(k) for k in keys) gave the bundle columns
    # alone, where list(key_fields) had kept them.
    from rms_duck.packing.batches import output_schema

    table = pa.table({"q": [1], "r": ["x"], "id": ["a"], "score": [0.5], "content": ["x"]})
    returned = rms_duck.pack_batches(table, by=["q", "r"], budget=300).schema
    assert output_schema(table.schema.field(k) for k in ("q", "r")) == returned
    assert output_schema(iter([table.schema.field("q"), table.schema.field("r")]),
                         inputs=True).names[:2] == ["q", "r"]


def test_store_batches_by_a_column_it_lacks_names_the_key_columns(con):
    # "by names column 'query', which the table lacks (columns: ...)" listed every bundle
    # column too, with no word on which to pass.
    packed = rms_duck.pack_batches(pa.table({"q": [1, 2], "id": ["a", "b"], "score": [0.5, 0.6],
                                             "content": ["x", "y"]}),
                                   by="q", budget=300, inputs=True)
    with pytest.raises(ConfigError) as raised:
        rms_duck.store_batches(con, packed, by="query")
    assert str(raised.value).endswith("). Pass the key column(s) pack_batches grouped by (q), "
                                      "or leave by out to use them all")
    with pytest.raises(ConfigError, match=r"\)\. Did you mean 'q'\? Pass the key column"):
        rms_duck.store_batches(con, packed, by="qq")


@pytest.mark.parametrize(("option", "message"), [
    # namespace=5 failed in Arrow ("Expected bytes, got a 'int' object"), session_id=7 was
    # sealed into the receipt as the JSON number 7, and by=5 raised "'int' object is not
    # iterable"; rms_duck.pack refuses the first two by name.
    ({"namespace": 5}, "namespace must be text (or None), got int 5; pass str(namespace)"),
    ({"session_id": 7}, "session_id must be text (or None), got int 7; pass str(session_id)"),
    ({"by": 5}, "by must name the key column(s) pack_batches grouped by, got 5; for example "
                "by='q'"),
])
def test_store_batches_refuses_a_label_or_key_of_the_wrong_kind(con, option, message):
    packed = rms_duck.pack_batches(pa.table({"q": [1], "id": ["a"], "score": [0.5],
                                             "content": ["x"]}), by="q", budget=300,
                                   inputs=True)
    with pytest.raises(ConfigError) as raised:
        rms_duck.store_batches(con, packed, **option)
    assert str(raised.value).startswith(message)
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]


@pytest.mark.parametrize("config", [
    None,
    {"context_citations": True, "context_guidance_mode": "all", "query": "When did it move?"},
    {"context_format": "compact", "session_context_packing": "adjacent"},
])
def test_bundle_array_is_the_array_of_the_bundles_rows(config):
    """pack_lists builds its output a column at a time (bundle_array); it must be the array
    Arrow makes of each bundle's row: empty, budget-error and nothing-fit bundles, conflicts,
    citations, guidance, warnings and the inputs column included."""
    from rms_duck.packing.arrowtype import bundle_array, bundle_arrow_type, bundle_row
    from rms_duck.packing.pipeline import pack_candidates

    table = rich_table(60, seed=5)
    groups: dict[int, list[dict]] = {}
    for row in table.to_pylist():
        turn = row.pop("turn")
        row.pop("tenant")
        groups.setdefault(turn, []).append(row)
    bundles = [pack_candidates(rows_, budget=budget, config=config)
               for (_, rows_), budget in zip(sorted(groups.items()),
                                             [512, 60, 0, 4096, 30] * 12, strict=False)]
    bundles.append(pack_candidates([], budget=512, config=config))
    assert any(b.conflicts for b in bundles) and any(b.warnings for b in bundles)
    assert any(not b.included for b in bundles) and any(b.flags for b in bundles)
    rows_out = [bundle_row(b) for b in bundles]
    expected = pa.array(rows_out, type=bundle_arrow_type())
    got = bundle_array(bundles)
    assert got.type == expected.type
    assert got.to_pylist() == expected.to_pylist()
    assert got.equals(expected)
    texts = [f"inputs {i}" for i in range(len(bundles))]
    with_inputs = bundle_array(bundles, texts)
    assert with_inputs.field("inputs").to_pylist() == texts
    assert pa.StructArray.from_arrays(
        [with_inputs.field(i) for i in range(len(BUNDLE_FIELDS))],
        fields=list(bundle_arrow_type())).equals(expected)


def test_receipt_decisions_show_has_content_and_null_before_version_7(con):
    """rms_receipt_decisions lacked the has_content every version-7 receipt records, so an
    auditor asking which packed records showed memory text had to parse the receipts. It
    is the receipt's own value per candidate, and NULL in the rows of an older receipt."""
    rms_duck.store_batches(con, _packed_by_release(con, 3, 6))
    rms_duck.store_batches(con, _packed(con, 3), namespace="now")
    rows = con.execute(
        "SELECT d.chain_namespace, d.receipt_id, d.node_id, d.decision, d.has_content "
        "FROM rms_receipt_decisions AS d").fetchall()
    old = [has for chain, _, _, _, has in rows if chain != "now"]
    assert old and all(has is None for has in old)
    viewed: dict[str, list[tuple]] = {}
    for chain, receipt_id, node, decision, has in rows:
        if chain == "now":
            viewed.setdefault(str(receipt_id), []).append((node, decision, has))
    assert {has for rows_of in viewed.values() for *_, has in rows_of} == {True, False}
    for receipt_id, rows_of in viewed.items():  # a pool may hold an id twice (DUPLICATE)
        receipt, = con.execute("SELECT receipt FROM rms_receipts WHERE receipt_id = ?",
                               [receipt_id]).fetchall()[0]
        recorded = [(c["id"], c["decision"], c["has_content"])
                    for c in json.loads(receipt)["candidates"]]
        assert sorted(rows_of) == sorted(recorded)
    explained = rms_duck.audit.explain.explain(con, con.execute(
        "SELECT any_value(receipt_id) FROM rms_receipts WHERE chain_namespace = 'now'"
    ).fetchall()[0][0])
    assert all(isinstance(row["has_content"], bool) for row in explained)

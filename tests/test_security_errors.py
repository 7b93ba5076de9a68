"""Adversarial review L2, L3, L4, L5, L6, L9, L10: clear errors for deep nesting, budgets out of
range, a full disk and a file another process holds; a budget within the overhead packs
nothing, as documented; bidirectional controls stay inside their JSON string; a connection
shared across threads works."""

from __future__ import annotations

import collections
import json
import re
import subprocess
import sys
import textwrap
import threading
import uuid

import duckdb
import pyarrow as pa
import pytest

import rms_duck
from rms_duck.cli import main
from rms_duck.duck.api import pack_rows
from rms_duck.errors import CandidateError, ConfigError, DatabaseInUseError

DEEP = "[" * 5000 + "]" * 5000
ROW = {"id": "a", "score": 0.5, "content": "x"}


def test_deeply_nested_config_is_a_config_error():
    with pytest.raises(ConfigError, match="config is nested too deeply"):
        rms_duck.pack_candidates([ROW], budget=300, config=DEEP)


def test_deeply_nested_structured_value_is_a_candidate_error(con):
    with pytest.raises(CandidateError, match="'structured_value' is nested too deeply"):
        rms_duck.pack_candidates([{**ROW, "structured_value": DEEP}], budget=300)
    with pytest.raises(Exception, match="CandidateError: .*nested too deeply"):
        con.execute("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'x', "
                    f"'structured_value': '{DEEP}'}}], 300)").fetchall()


def test_params_nested_too_deeply_are_a_config_error_naming_the_parameter(con):
    """A parameter nested 100,000 deep ended in DuckDB's client as a bare RecursionError."""
    deep: list = []
    inner = deep
    for _ in range(100_000):
        inner.append([])
        inner = inner[0]
    sql = "SELECT 'a' AS id, 0.5 AS score, 'x' AS content WHERE ? IS NOT NULL AND ? = 1"
    with pytest.raises(ConfigError, match=r"params hold a value nested too deeply to bind "
                                          r"\(params\[1\], more than 100 levels\)"):
        rms_duck.pack(con, sql, params=[1, deep], budget=300, store=False)


@pytest.mark.parametrize("store", [True, False])
def test_a_budget_beyond_32_bits_says_the_range(con, store):
    with pytest.raises(ConfigError, match=r"in -2,147,483,648\.\.2,147,483,647 tokens.*1\.\.2,147"):
        rms_duck.pack(con, pa.Table.from_pylist([ROW]), budget=2**31, store=store)
    assert rms_duck.pack(con, pa.Table.from_pylist([ROW]), budget=2**31 - 1).tokens_used > 0


@pytest.mark.parametrize("store", [False, True])
def test_budgets_and_labels_the_tables_cannot_hold_are_named_and_nothing_is_stored(con, store):
    table = pa.Table.from_pylist([ROW])
    cases = [
        ({"budget": -2**31 - 1}, r"budget must be in -2,147,483,648\.\.2,147,483,647 tokens"),
        ({"budget": 300, "namespace": 5}, r"namespace must be text \(or None\), got int 5"),
        ({"budget": 300, "session_id": uuid.UUID(int=7)},
         r"session_id must be text \(or None\), got UUID"),
    ]
    for kwargs, message in cases:
        with pytest.raises(ConfigError, match=message):
            rms_duck.pack(con, table, store=store, **kwargs)
    assert con.execute("SELECT count(*) FROM rms_bundles").fetchall() == [(0,)]
    # RFC section 7: a budget of 0 or less gives an empty bundle, never an error; the
    # stored `available` (an INTEGER) is floored at the smallest one.
    for budget, overhead in ((-2**31, 100), (-5, 2**31 - 1), (-5, 10**12)):
        bundle = rms_duck.pack(con, table, budget=budget, config={"overhead_tokens": overhead},
                               store=True)
        assert bundle.flags == ("BUDGET_ERROR",) and bundle.available == -2**31
    assert rms_duck.verify_receipts(con) == []


def test_a_lone_surrogate_is_escaped_in_the_context_and_named_when_stored(con, capsys):
    rows = [{"id": "n1", "score": 0.5, "content": "bad \udfff text"}]
    assert '\n"bad \\udfff text"\n' in rms_duck.pack_candidates(rows, budget=400).context
    with pytest.raises(CandidateError, match="lone surrogate.*nothing was stored.*store=False"):
        pack_rows(con, rows, budget=400)
    assert con.execute("SELECT count(*) FROM rms_bundles").fetchall() == [(0,)]
    pack_rows(con, [{"id": "n2", "score": 0.5, "content": "fine"}], budget=400)
    assert rms_duck.verify_receipts(con) == []


@pytest.mark.parametrize("row, kwargs, named", [
    ({"namespace_id": "ns \ud800"}, {}, "candidate #1 (id 'n2'): field 'namespace_id'"),
    ({"speaker": "\udfffMaya"}, {}, "candidate #1 (id 'n2'): field 'speaker'"),
    ({"structured_value": '{"k": "\\ud800"}'}, {}, "field 'structured_value'"),
    ({"evidence_ids": ["e\ud800"]}, {}, "field 'evidence_ids'"),
    ({}, {"namespace": "ns\ud800"}, "namespace holds"),
    ({}, {"session_id": "s\ud800"}, "session_id holds"),
])
def test_a_stored_lone_surrogate_is_named_by_candidate_and_field(con, row, kwargs, named):
    # json.loads keeps JSON's \\ud800 escape as one. A namespace's raised DuckDB's bare "Python
    # Conversion Failure"; the others said only "a candidate's text".
    rows = [{"id": "n1", "score": 0.5, "content": "fine"},
            {"id": "n2", "score": 0.5, "content": "x", **row}]
    with pytest.raises(rms_duck.RmsError, match="lone surrogate") as raised:
        pack_rows(con, rows, budget=400, **kwargs)
    message = str(raised.value)
    assert named in message and "nothing was stored" in message and "store=False" in message
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]


def test_a_lone_surrogate_escape_in_a_batch_of_bundles_stores_none_of_them(con):
    """JSON's \\ud800 escape, which Python's json reads, in the inputs of one bundle of
    several: DuckDB's JSON column refuses it whether the bundles go in from rms_store or
    store_batches. (Sent to DuckDB as Arrow's JSON type, such inputs went in unchecked,
    and every json_* query over rms_bundles.inputs then failed.)"""
    with pytest.raises(duckdb.Error, match="lone surrogate.*nothing was stored"):
        con.execute("""SELECT g, rms_store(list(c), 400) FROM (
            SELECT g % 2 AS g, 'a' || g AS id, 0.5 AS score, 'x' AS content,
                   CASE WHEN g = 3 THEN '{"k": "\\ud800"}' END AS structured_value
            FROM range(4) t(g)) AS c GROUP BY ALL""").fetchall()
    rows = [{"g": 1, "id": "a", "score": 0.5, "content": "x",
             "structured_value": '{"k": "\\ud800"}'},
            {"g": 2, "id": "b", "score": 0.5, "content": "fine"}]
    packed = rms_duck.pack_batches(pa.Table.from_pylist(rows), by="g", budget=400,
                                   inputs=True)
    with pytest.raises(CandidateError, match="lone surrogate.*nothing was stored"):
        rms_duck.store_batches(con, packed)
    assert con.execute("SELECT count(*) FROM rms_bundles").fetchall() == [(0,)]


def test_a_config_query_with_a_lone_surrogate_is_refused_before_storing(con):
    # The receipt records the config: the pack stored, yet DuckDB read its receipt as
    # malformed JSON, so verify_receipts reported MALFORMED_RECEIPT for an untouched pack.
    rows = [{"id": "n1", "score": 0.5, "content": "fine"}]
    config = {"query": "when did \ud800 happen first?"}
    assert pack_rows(con, rows, budget=400, config=config, store=False).included_ids == ["n1"]
    refused = "config field 'query' holds a lone surrogate ('\\ud800'"
    with pytest.raises(ConfigError, match=re.escape(refused)):
        pack_rows(con, rows, budget=400, config=config)
    with pytest.raises(Exception, match=re.escape(refused)):  # DuckDB wraps it in SQL
        con.execute("SELECT rms_store(list(c), 400, ?) FROM (SELECT 'a' AS id, 0.5 AS score, "
                    "'x' AS content) AS c", [json.dumps(config)]).fetchall()
    packed = rms_duck.pack_batches(pa.Table.from_pylist([{**rows[0], "g": 1}]), by="g",
                                   budget=400, config=config, inputs=True)
    with pytest.raises(ConfigError, match=r"bundle of g=1: " + re.escape(refused)):
        rms_duck.store_batches(con, packed)
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]
    # One config object packs and stores many bundles: its check is remembered only when
    # it passes, so the refused one is refused again, with an error of its own.
    from rms_duck.config import parse_config

    parsed = parse_config(config)
    for _ in range(2):
        with pytest.raises(ConfigError, match=re.escape(refused)):
            pack_rows(con, rows, budget=400, config=parsed)
    clean = parse_config({"query": "when did it happen first?"})
    for _ in range(2):
        assert pack_rows(con, rows, budget=400, config=clean).receipt_id
    assert rms_duck.verify_receipts(con) == []


def test_a_budget_beyond_32_bits_in_sql_says_the_range(con):
    with pytest.raises(Exception, match=r"pack_context: budget must be in -2,147,483,648\.\."):
        con.execute("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'x'}], "
                    "2147483648)").fetchall()


@pytest.mark.slow  # 3-9 s on a 2-core machine: the slow step runs it
def test_a_full_disk_fails_fast_with_a_clear_error(tmp_path):
    """RLIMIT_FSIZE stands in for a full disk (no root or tmpfs needed): writes fail with
    EFBIG as they would with ENOSPC, and the store must not retry them as conflicts."""
    script = textwrap.dedent(f"""
        import resource, signal, sys
        import pyarrow as pa, rms_duck
        from rms_duck.duck import storage
        from rms_duck.errors import ReceiptError
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        con = rms_duck.connect({str(tmp_path / "full.duckdb")!r})
        con.execute("CHECKPOINT")
        resource.setrlimit(resource.RLIMIT_FSIZE, (4 * 1024 * 1024, 4 * 1024 * 1024))
        calls = 0
        once = storage._store_once
        def counted(*a, **k):
            global calls
            calls += 1
            return once(*a, **k)
        storage._store_once = counted
        for i in range(10_000):
            try:
                rms_duck.pack(con, pa.Table.from_pylist([{{"id": f"r{{i}}-{{j}}", "score": 0.5,
                    "content": f"pack {{i}} record {{j}} " + "lorem ipsum dolor " * 40}}
                    for j in range(40)]), budget=3000, namespace="full")
                calls = 0
            except ReceiptError as exc:
                print("ReceiptError", calls, exc)
                sys.exit(0)
            except Exception as exc:
                print("OTHER", type(exc).__name__, exc)
                sys.exit(0)
        print("never full")
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=600).stdout
    assert out.startswith("ReceiptError 1 "), out
    assert "cannot grow" in out and "free disk space" in out and "nothing was stored" in out


@pytest.mark.slow
def test_a_connection_shared_across_threads_works():
    con = rms_duck.connect()
    con.execute("INSERT INTO rms_nodes (id, content) "
                "SELECT uuid(), 'note ' || i FROM range(50) t(i)")
    seen = collections.Counter()

    def work():
        for _ in range(5):
            try:
                rms_duck.pack(con, "SELECT CAST(id AS VARCHAR) AS id, 0.5 AS score, content "
                                   "FROM rms_nodes", budget=300)
                seen["ok"] += 1
            except Exception as exc:  # noqa: BLE001 - counted and reported
                seen[f"{type(exc).__name__}: {exc}"] += 1

    threads = [threading.Thread(target=work) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"ok": 30}
    assert rms_duck.verify_receipts(con) == []
    assert con.execute("SELECT count(*), max(seq) FROM rms_receipts").fetchone() == (30, 30)


@pytest.mark.slow
def test_a_database_another_process_holds_is_a_clear_error(tmp_path, capsys):
    path = tmp_path / "held.duckdb"
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import sys, rms_duck
            con = rms_duck.connect({str(path)!r})
            print("open", flush=True)
            sys.stdin.read()
        """)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "open"
        with pytest.raises(DatabaseInUseError, match="close that process's connection"):
            rms_duck.connect(str(path))
        assert main(["demo", "--db", str(path)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("Error: cannot open database") and "Traceback" not in err
        assert f"PID {holder.pid}" in err
    finally:
        holder.communicate("")
    rms_duck.connect(str(path)).close()  # free again once the holder has gone


def test_a_missing_file_opened_read_only_is_not_told_to_use_a_new_file(tmp_path):
    """Read-only said "pass the path of a DuckDB file, or of a new file in a folder that
    exists ...", but read-only opens no new file (rms-duck serve --read-only, audits)."""
    from rms_duck.errors import DatabaseOpenError

    missing = str(tmp_path / "missing.duckdb")
    with pytest.raises(DatabaseOpenError) as raised:
        rms_duck.connect(missing, read_only=True)
    assert str(raised.value).endswith(
        "; pass the path of an existing DuckDB file (read-only opens no new one: create it "
        "first with rms_duck.connect(path))")
    with pytest.raises(DatabaseOpenError, match="or of a new file in a folder that exists"):
        rms_duck.connect(str(tmp_path / "no-such-folder" / "x.duckdb"))


@pytest.mark.parametrize("first", [False, True])
def test_a_file_this_process_holds_the_other_way_is_named_as_held(tmp_path, first):
    """A notebook holding the file writable, then connecting read-only (or the reverse),
    was told the file did not exist or its folder could not be written."""
    from rms_duck.errors import DatabaseOpenError

    path = str(tmp_path / "nb.duckdb")
    rms_duck.connect(path).close()
    held = rms_duck.connect(path, read_only=first)
    try:
        with pytest.raises(DatabaseOpenError) as raised:
            rms_duck.connect(path, read_only=not first)
        message = str(raised.value)
        assert "different configuration" in message  # DuckDB's own words stay
        assert f"this process already has the file open {'read-only' if first else 'writable'}"\
            in message
        assert "con.close()" in message
        assert "existing DuckDB file" not in message and "new file" not in message
    finally:
        held.close()
    rms_duck.connect(path, read_only=not first).close()  # fine once the other is closed


@pytest.mark.parametrize("budget", [1, 50, 100])
def test_a_budget_within_the_overhead_packs_nothing(budget):
    # docs/packing.md: tokens_used <= max(0, budget - overhead_tokens); available may be < 0.
    bundle = rms_duck.pack_candidates([ROW, dict(ROW, id="b")], budget=budget)
    assert bundle.available == budget - 100 and bundle.context == ""
    assert bundle.tokens_used == 0 and not bundle.included
    assert {r.reason.name for r in bundle.excluded} == {"BUDGET_EXHAUSTED"}
    assert "BUDGET_ERROR" not in bundle.flags


def test_bidirectional_controls_stay_inside_their_json_string():
    # Adversarial review L9: they reach the context raw (docs/formats.md says why), but a
    # record line stays one line whose JSON string holds every character given.
    text = "\u202eevil\u202c ok \u2066x\u2069 \u200f"
    bundle = rms_duck.pack_candidates([dict(ROW, content=text)], budget=300)
    lines = [line for line in bundle.context.splitlines() if "\u202e" in line]
    assert len(lines) == 1
    assert json.dumps(text, ensure_ascii=False) in lines[0]

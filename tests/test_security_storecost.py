"""Adversarial review, resources: per-pack store time grew with the database (34 to 153 ms
per pack at 6,000 receipts in memory). Two causes, each reproduced here without a clock:
an in-memory database checkpointed its growing tables as commits accumulated, and the
line-cost lookup scanned every stored row. `rms-duck bench --store-cost N` measures the
time itself."""

from __future__ import annotations

import hashlib
import json
import uuid

import duckdb
import pytest

import rms_duck
from rms_duck.duck.connection import IN_MEMORY_CHECKPOINT
from rms_duck.duck.linecosts import _LOOKUP_BATCH, load_line_costs, lookup_sql
from rms_duck.duck.sqlfiles import read_sql
from rms_duck.tokens.costfile import encoding_key


def _checkpoints_after_big_commits(con: duckdb.DuckDBPyConnection) -> int:
    """Commit 400 rows of 60 KB one at a time (24 MB, past DuckDB's 16 MiB default) and
    count the checkpoints DuckDB logged."""
    con.execute("CALL enable_logging(level => 'debug')")
    con.execute("CREATE TABLE big (id UUID PRIMARY KEY, body VARCHAR)")
    for _ in range(400):
        con.execute("INSERT INTO big VALUES (?, ?)", [str(uuid.uuid4()), "x" * 60_000])
    return con.execute("SELECT count(*) FROM duckdb_logs WHERE type = 'Checkpoint'").fetchone()[0]


@pytest.mark.slow
def test_an_in_memory_database_does_not_checkpoint_as_commits_accumulate():
    # The reproduction: plain DuckDB in memory rewrites its tables while commits pile up.
    assert _checkpoints_after_big_commits(duckdb.connect()) > 0
    assert _checkpoints_after_big_commits(rms_duck.connect()) == 0


def test_a_database_file_keeps_duckdbs_checkpoint_threshold(tmp_path):
    # A file needs its checkpoints (they bound the write-ahead log): left as DuckDB sets it.
    default = duckdb.connect().execute("SELECT current_setting('checkpoint_threshold')").fetchone()
    con = rms_duck.connect(str(tmp_path / "f.duckdb"))
    assert con.execute("SELECT current_setting('checkpoint_threshold')").fetchone() == default
    raised = duckdb.connect()
    raised.execute(f"SET checkpoint_threshold = '{IN_MEMORY_CHECKPOINT}'")
    memory = rms_duck.connect()
    assert (memory.execute("SELECT current_setting('checkpoint_threshold')").fetchone()
            == raised.execute("SELECT current_setting('checkpoint_threshold')").fetchone()
            != default)


def _scan(con: duckdb.DuckDBPyConnection, sql: str, path) -> tuple[str, int]:
    """(scan type, rows scanned) of the one table scan in sql's plan, from DuckDB's profiler."""
    out = str(path / "profile.json")
    con.execute("PRAGMA enable_profiling = 'json'")
    con.execute(f"PRAGMA profiling_output = '{out}'")
    con.execute(sql).fetchall()
    con.execute("PRAGMA disable_profiling")
    scans = []

    def walk(node):
        if node.get("type") == "TABLE_SCAN":
            scans.append((node["extra_info"].get("Type"), node["rows_scanned"]))
        for child in node.get("children", []):
            walk(child)

    for node in json.load(open(out))["operator"]:
        walk(node)
    assert len(scans) == 1, scans
    return scans[0]


@pytest.mark.parametrize("stored", [20_000, 100_000])
def test_line_cost_lookups_probe_the_index_however_many_rows_are_stored(tmp_path, stored):
    con = duckdb.connect()
    con.execute(read_sql("schema.sql"))
    key = encoding_key("o200k_base")
    con.execute("INSERT INTO rms_line_costs SELECT ?, sha256(i::VARCHAR), 5 FROM range(?) t(i)",
                [key, stored])
    digests = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(0, 600, 20)]
    kind, rows = _scan(con, lookup_sql(digests), tmp_path)
    assert kind == "Index Scan" and rows == len(digests)
    # A full batch too, and the shape the lookup had before: a second predicate scans it all.
    batch = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(_LOOKUP_BATCH)]
    assert _scan(con, lookup_sql(batch), tmp_path) == ("Index Scan", _LOOKUP_BATCH)
    both = lookup_sql(digests) + f" AND encoding = '{key}'"
    assert _scan(con, both, tmp_path)[1] == stored


def test_the_lookup_still_keeps_only_the_packs_encoding():
    con = rms_duck.connect()
    con.execute("INSERT INTO rms_line_costs VALUES (?, ?, 7), (?, ?, 9)",
                [encoding_key("o200k_base"), hashlib.sha256(b"a line").hexdigest(),
                 encoding_key("cl100k_base"), hashlib.sha256(b"a line").hexdigest()])
    assert load_line_costs(con, ["a line"], encoding="o200k_base") == {"a line": 7}
    assert load_line_costs(con, ["a line"], encoding="cl100k_base") == {"a line": 9}
    assert lookup_sql(["not a digest"]) is None


@pytest.mark.slow  # 3-9 s on a 2-core machine: the slow step runs it
def test_the_store_cost_bench_fills_through_the_real_store_path(tmp_path, capsys):
    from rms_duck.cli import main

    path = str(tmp_path / "full.duckdb")
    assert main(["bench", "--store-cost", "20", "--db", path]) == 0
    out = capsys.readouterr().out
    assert "filled 20 receipts and 400 line costs" in out and "paired ratio" in out
    con = rms_duck.connect(path, read_only=True)
    # 20 filler receipts on their own chain, then the warm-up and timed packs: all verified.
    assert con.execute("SELECT count(*) FROM rms_receipts WHERE chain_namespace = 'filler'"
                       ).fetchone() == (20,)
    assert rms_duck.verify_receipts(con) == []


def test_connect_still_takes_a_path_object(tmp_path):
    con = rms_duck.connect(tmp_path / "p.duckdb")  # a pathlib.Path, as duckdb.connect takes
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchone() == (0,)

"""Same input, same bytes: whatever the input order, the process, the hash seed, the DuckDB
session time zone, or the offset an instant was written with.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta, timezone

import duckdb
import pytest

import rms_duck

FORMATS = ["reader", "auditable", "compact"]


def sample_rows() -> list[dict]:
    """Ties, duplicates, conflicts, pins, tasks, episodes, namespaces, speakers and times."""
    rows = []
    for i in range(24):
        rows.append({
            "id": f"node-{i:02d}",
            "score": [0.9, 0.5, 0.5, 0.25][i % 4],  # plenty of ties, broken on id
            "content": f"memory {i}: " + "Maya moved to Lisbon in 2025 and likes tea. " * (i % 5),
            "type": ["note", "fact", "task", "decision", "entity", "event"][i % 6],
            "confidence": 0.4 + (i % 6) / 10,
            "paths": [["LEXICAL"], ["LEXICAL", "SEMANTIC"], ["EPISODE_CONTEXT"], []][i % 4],
            "pinned": i % 11 == 0,
            "salience": 1.0 if i % 13 == 5 else 0.5,
            "namespace_id": [None, "work", "home"][i % 3],
            "speaker": ["Maya", None, "Assistant"][i % 3],
            "event_time": datetime(2025, 1, 1, tzinfo=UTC) + timedelta(hours=7 * i),
            "contradicts": [f"node-{(i + 7) % 24:02d}"] if i % 5 == 0 else [],
        })
    rows.append({**rows[3], "score": 0.1, "content": "a lower-scored copy of node-03"})
    rows.append({**rows[4], "content": "an equal-scored copy of node-04"})
    return rows


def pack_all(rows, budget=900) -> dict[str, rms_duck.MemoryBundle]:
    out = {}
    for fmt in FORMATS:
        config = {"context_format": fmt, "context_citations": fmt == "reader"}
        out[fmt] = rms_duck.pack_candidates(rows, budget=budget, config=config)
    return out


def fingerprint(bundles: dict[str, rms_duck.MemoryBundle]) -> dict[str, list[str]]:
    return {fmt: [hashlib.sha256(b.render().encode("utf-8")).hexdigest(),
                  hashlib.sha256(b.receipt.encode("utf-8")).hexdigest()]
            for fmt, b in bundles.items()}


def test_sample_is_a_real_squeeze():
    bundles = pack_all(sample_rows())
    for bundle in bundles.values():
        assert bundle.included and bundle.excluded
        assert "DUPLICATE" in {r.reason.value for r in bundle.excluded}
        assert bundle.conflicts


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_any_input_order_gives_identical_bytes(seed):
    rows = sample_rows()
    expected = pack_all(rows)
    shuffled = list(rows)
    random.Random(seed).shuffle(shuffled)
    for fmt, bundle in pack_all(shuffled).items():
        assert bundle.render().encode("utf-8") == expected[fmt].render().encode("utf-8")
        assert bundle.receipt == expected[fmt].receipt
        assert bundle.included_ids == expected[fmt].included_ids
        assert bundle.excluded_ids == expected[fmt].excluded_ids


def test_reversed_and_sorted_orders_give_identical_bytes():
    rows = sample_rows()
    variants = [rows, rows[::-1], sorted(rows, key=lambda r: r["score"]),
                sorted(rows, key=lambda r: r["content"], reverse=True)]
    prints = [fingerprint(pack_all(v)) for v in variants]
    assert all(p == prints[0] for p in prints)


SUBPROCESS_SCRIPT = textwrap.dedent("""
    import json, sys
    sys.path.insert(0, {tests_parent!r})
    from tests.test_determinism import fingerprint, pack_all, sample_rows
    print(json.dumps(fingerprint(pack_all(sample_rows())), sort_keys=True))
""")


@pytest.mark.slow
def test_separate_processes_and_hash_seeds_give_identical_bytes(tmp_path):
    script = tmp_path / "pack_once.py"
    tests_parent = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script.write_text(SUBPROCESS_SCRIPT.format(tests_parent=tests_parent))
    runs = [subprocess.Popen([sys.executable, str(script)],
                             env={**os.environ, "PYTHONHASHSEED": seed},
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for seed in ("0", "12345")]
    outputs = []
    for run in runs:
        out, err = run.communicate(timeout=120)
        assert run.returncode == 0, err
        outputs.append(json.loads(out))
    assert outputs[0] == outputs[1]
    assert outputs[0] == json.loads(json.dumps(fingerprint(pack_all(sample_rows()))))


# -- DuckDB: session time zone, offsets, list order ----------------------------------------

TIMES_SQL = """
    SELECT * FROM (VALUES
        ('a', 0.9, 'Maya landed in Lisbon', TIMESTAMPTZ '2026-03-01 09:15:00+00'),
        ('b', 0.7, 'Maya booked the flight', TIMESTAMPTZ '2026-02-10 23:30:00-05:00'),
        ('c', 0.5, 'Maya signed the lease', TIMESTAMPTZ '2026-02-20 00:00:00+09:00'),
        ('d', 0.3, 'An undated note', NULL::TIMESTAMPTZ)
    ) AS v(id, score, content, event_time)
"""


def sql_pack(con, fmt: str, order: str = "") -> dict:
    rows = con.sql(
        f"SELECT pack_context(list(c{order}), 600, {{'context_format': '{fmt}'}}) "
        f"FROM ({TIMES_SQL}) AS c").fetchall()
    [(bundle,)] = rows
    return bundle


@pytest.fixture(scope="module")
def utc_con():
    """One rms_duck.connect() connection for the read-only SQL cases (connect() costs ~0.4 s)."""
    connection = rms_duck.connect()
    yield connection
    connection.close()


@pytest.fixture
def tokyo_con():
    """A connection whose session zone was Asia/Tokyo before rms_duck.register()."""
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'Asia/Tokyo'")
    rms_duck.register(connection)
    yield connection
    connection.close()


@pytest.mark.parametrize("fmt", FORMATS)
def test_session_time_zone_does_not_change_bytes(utc_con, tokyo_con, fmt):
    [(zone,)] = tokyo_con.sql("SELECT current_setting('TimeZone')").fetchall()
    assert zone == "UTC"  # register() puts the connection in UTC
    utc_bundle = sql_pack(utc_con, fmt)
    assert sql_pack(tokyo_con, fmt) == utc_bundle
    # Even a session switched to Tokyo after register() packs TIMESTAMPTZ instants the same.
    tokyo_con.execute("SET TimeZone = 'Asia/Tokyo'")
    assert sql_pack(tokyo_con, fmt)["context"] == utc_bundle["context"]
    assert sql_pack(tokyo_con, fmt)["receipt"] == utc_bundle["receipt"]


def test_sql_times_render_in_utc(utc_con):
    context = sql_pack(utc_con, "reader")["context"]
    # Reader records sit in date order under a year and a day line, in UTC (each day has
    # one time, so no time line); the year is stated once for all three.
    assert context.count("\n2026\n") == 1
    assert '\n2026\n11 Feb\n"Maya booked the flight"\n' in context
    assert '\n19 Feb\n"Maya signed the lease"\n' in context
    assert '\n1 Mar\n"Maya landed in Lisbon"\n' in context
    assert '\n# context\n"An undated note"\n' in context
    audit = sql_pack(utc_con, "auditable")["context"]
    assert '"event_time":"2026-02-11T04:30:00+00:00"' in audit
    assert '"event_time":"2026-03-01T09:15:00+00:00"' in audit


@pytest.mark.parametrize("order", [
    pytest.param("", id="unordered"),
    pytest.param(" ORDER BY score DESC", id="score-desc"),
    pytest.param(" ORDER BY id DESC", id="id-desc"),
    pytest.param(" ORDER BY content", id="content"),
])
@pytest.mark.parametrize("fmt", FORMATS)
def test_list_order_in_sql_does_not_matter(utc_con, fmt, order):
    assert sql_pack(utc_con, fmt, order) == sql_pack(utc_con, fmt, " ORDER BY score")


SAME_INSTANT = [
    "TIMESTAMPTZ '2026-05-28 18:12:00+00'",
    "TIMESTAMPTZ '2026-05-29 03:12:00+09:00'",
    "TIMESTAMPTZ '2026-05-28 12:42:00-05:30'",
    "'2026-05-28T18:12:00Z'",
]


@pytest.mark.parametrize("fmt", FORMATS)
def test_equal_instants_with_different_offsets_render_identically_in_sql(utc_con, enc, fmt):
    bundles = []
    for literal in SAME_INSTANT:
        [(bundle,)] = utc_con.sql(
            f"SELECT pack_context([{{'id': 'a', 'score': 0.5, 'content': 'Maya arrived',"
            f" 'event_time': {literal}, 'valid_from': {literal}}}], 500,"
            f" {{'context_format': '{fmt}'}})").fetchall()
        bundles.append(bundle)
    assert all(b["context"] == bundles[0]["context"] for b in bundles)
    assert all(b["tokens_used"] == bundles[0]["tokens_used"] for b in bundles)
    assert bundles[0]["tokens_used"] == len(enc.encode_ordinary(bundles[0]["context"]))
    # The reader prints the day alone: the day's one record has one time.
    assert ("2026-05-28" if fmt != "reader" else '\n2026\n28 May\n"Maya arrived"\n') in \
        bundles[0]["context"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_equal_instants_with_different_offsets_render_identically_in_python(fmt):
    instant = datetime(2026, 5, 28, 18, 12, tzinfo=UTC)
    zones = [UTC, timezone(timedelta(hours=9)), timezone(timedelta(hours=-5, minutes=-30))]
    spellings = [instant.astimezone(z) for z in zones]
    spellings += [instant.astimezone(zones[1]).isoformat(), "2026-05-28T18:12:00Z"]
    contexts = set()
    receipts = set()
    for when in spellings:
        rows = [{"id": "a", "score": 0.5, "content": "Maya arrived", "event_time": when,
                 "valid_to": when}]
        bundle = rms_duck.pack_candidates(rows, budget=500, config={"context_format": fmt})
        contexts.add(bundle.render())
        receipts.add(bundle.receipt)
    assert len(contexts) == 1 and len(receipts) == 1


def test_naive_python_times_stay_nominal():
    rows = [{"id": "a", "score": 0.5, "content": "x", "event_time": datetime(2026, 5, 28, 18, 12)},
            {"id": "b", "score": 0.4, "content": "y", "event_time": datetime(2026, 5, 28, 9, 0)}]
    audit = rms_duck.pack_candidates(rows, budget=500, config={"context_format": "auditable"})
    assert '"event_time":"2026-05-28T18:12:00"' in audit.render()
    reader = rms_duck.pack_candidates(rows, budget=500)  # two times: both time lines print
    assert '\n2026\n28 May\n09:00 "y"\n18:12\n"x"\n' in reader.render()


def test_sql_and_python_give_the_same_bytes(utc_con):
    rows = utc_con.sql(TIMES_SQL).to_arrow_table().to_pylist()
    for fmt in FORMATS:
        python = rms_duck.pack_candidates(rows, budget=600, config={"context_format": fmt})
        sql = sql_pack(utc_con, fmt)
        assert sql["context"] == python.render()
        assert sql["receipt"] == python.receipt


def test_group_by_packs_each_group_independently_of_the_others(utc_con):
    utc_con.execute("""
        CREATE OR REPLACE TEMP TABLE notes AS
        SELECT i % 3 AS grp, 'n' || i AS id, ((i * 37) % 100) / 100.0 AS score,
               'note ' || i || ' about project ' || (i % 3) AS content
        FROM range(30) t(i)""")
    together = dict(utc_con.sql(
        "SELECT grp, pack_context(list(n), 300).context FROM notes n GROUP BY grp").fetchall())
    for grp in range(3):
        [(alone,)] = utc_con.sql(
            "SELECT pack_context(list(n), 300).context FROM notes n WHERE grp = ?",
            params=[grp]).fetchall()
        assert together[grp] == alone
    for a, b in itertools.combinations(together.values(), 2):
        assert a and b and a != b


def test_naive_sql_timestamps_ignore_a_zone_set_after_register(tokyo_con, utc_con):
    query = ("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'x', "
             "'event_time': TIMESTAMP '2026-01-01 10:00:00'}], 500).context")
    [(in_utc,)] = utc_con.sql(query).fetchall()
    tokyo_con.execute("SET TimeZone = 'Asia/Tokyo'")
    [(in_tokyo,)] = tokyo_con.sql(query).fetchall()
    assert in_tokyo == in_utc


def _large_store(nodes: int) -> tuple[duckdb.DuckDBPyConnection, list[str]]:
    """A store whose lexical index spans several of DuckDB's row groups, so the ranking's
    scans and aggregates run on several threads."""
    from rms_duck.bench.workload import vocabulary

    con = rms_duck.connect()
    con.execute("SET threads = 4")  # parallel even on a 1-core runner
    words = vocabulary(3)
    con.execute(
        "INSERT INTO rms_nodes (id, content, session_id, session_position) "
        "SELECT CAST(md5('node' || i) AS UUID), array_to_string(list_transform("
        "range((12 + hash(i) % 20)::BIGINT), lambda x: list_extract(?::VARCHAR[], "
        "(1 + hash(i, x) % ?)::BIGINT)), ' ') || '.', 'session ' || (i // 20), i % 20 "
        "FROM range(?) t(i)", [words, len(words), nodes])
    rms_duck.refresh_index(con)
    [(groups,)] = con.execute("SELECT count(DISTINCT row_group_id) FROM "
                              "pragma_storage_info('rms_lexical_terms')").fetchall()
    assert groups >= 2  # else every scan runs on one thread and the test shows nothing
    return con, words


@pytest.mark.slow
def test_ranking_scores_are_the_same_bits_on_every_run_of_a_parallel_scan():
    """Floating-point sums depend on the order they add in, and a parallel aggregate adds
    in whatever order its threads finish: the BM25 and lexical-signal sums once differed
    in the last bit from run to run here (most queries on such a store did), so a stored
    receipt's scores, and the order of near ties, were not reproducible."""
    con, words = _large_store(9_000)
    for j in range(2):
        query = " ".join(words[j * 7:j * 7 + 9])
        runs = {tuple((row[0], row[1].hex()) for row in con.execute(
            "SELECT id, score FROM rms_candidates(?, k := 200, ngram_min := 0)",
            [query]).fetchall()) for _ in range(4)}
        assert len(runs) == 1, f"{len(runs)} different rankings of {query!r} in 4 runs"


@pytest.mark.slow
def test_a_candidates_contradicts_list_has_one_order_on_every_run():
    """rms_candidates lists a node's CONTRADICTS counterparts with list(), which keeps the
    order the scan's threads produced; the stored inputs keep the list as given, so a
    receipt's inputs_sha256 once differed between two runs of one query."""
    con = rms_duck.connect()
    con.execute("SET threads = 4")
    con.execute("INSERT INTO rms_nodes (id, content, namespace_id) SELECT CAST(md5('n' || i) "
                "AS UUID), 'the budget for project ' || (i % 50) || ' is ' || i, 'ns' "
                "FROM range(3000) t(i)")
    con.execute("INSERT INTO rms_edges (source_id, target_id, kind) SELECT CAST(md5('n0') "
                "AS UUID), CAST(md5('n' || i) AS UUID), 'CONTRADICTS' FROM range(1, 51) t(i)")
    con.execute("INSERT INTO rms_edges (source_id, target_id, kind) SELECT CAST(md5('n' || i) "
                "AS UUID), CAST(md5('n0') AS UUID), 'CONTRADICTS' FROM range(51, 101) t(i)")
    rms_duck.refresh_index(con)
    query = "SELECT * FROM rms_candidates('budget project 0', 'ns', k := 50)"
    lists, digests = set(), set()
    for _ in range(6):
        rows = con.execute(f"SELECT contradicts FROM ({query}) WHERE contradicts <> []").fetchall()
        lists.add(tuple(map(tuple, (row[0] for row in rows))))
        [(receipt_id,)] = con.execute(f"SELECT rms_store(list(c), 4096) FROM ({query}) AS c"
                                      ).fetchall()
        digests.add(con.execute("SELECT json_extract_string(receipt, '$.inputs_sha256') FROM "
                                "rms_receipts WHERE receipt_id = ?", [receipt_id]).fetchone())
    assert len(lists) == 1 and max(map(len, next(iter(lists)))) == 100
    assert all(list(ids) == sorted(ids) for ids in next(iter(lists)))
    assert len(digests) == 1

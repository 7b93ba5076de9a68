"""Crash safety: SIGKILL a process while it packs and stores, then reopen the database.

Each trial starts a child that packs and stores in a loop on two threads (ranking queries
and Arrow input, two receipt chains, an occasional CHECKPOINT) and kills it at a random
moment. After every kill the database must open, every receipt must have its bundle and
every bundle its receipt, no row may be half-written, and verify_receipts() must pass.
Two lanes (two database files) run side by side to keep the wall time down.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid

import duckdb
import pytest

import rms_duck

TRIALS_PER_LANE = 10  # x LANES = 20 kills
LANES = 2

CHILD = r"""
import random, sys, threading
import duckdb, pyarrow as pa
import rms_duck

db, seed = sys.argv[1], int(sys.argv[2])
con = rms_duck.connect(db)
QUERY = ("SELECT CAST(id AS VARCHAR) AS id, salience AS score, content, namespace_id "
         "FROM rms_nodes WHERE content LIKE ? ORDER BY id")

started = threading.Barrier(3)

def work(k):
    rng = random.Random(seed * 10 + k)
    cur = con.cursor()
    i = 0
    while True:
        i += 1
        if i == 2:
            started.wait()  # both threads have stored a pack: steady state from here on
        if k == 0 and i % 2:
            rms_duck.pack(cur, QUERY, params=["%" + rng.choice("aeiou") + "%"],
                          budget=rng.choice([200, 400]), session_id=f"s{seed}")
        else:
            rows = [{"id": f"c{seed}-{k}-{i}-{j}", "score": rng.random(),
                     "content": f"note {j} of pack {i} " * rng.randint(1, 20)}
                    for j in range(rng.randint(1, 5))]
            rms_duck.pack(cur, pa.Table.from_pylist(rows), budget=rng.choice([120, 300]),
                          namespace=rng.choice(["a", "b"]), session_id=f"s{seed}")
        if rng.random() < 0.05:
            try:
                cur.execute("CHECKPOINT")
            except duckdb.Error:
                pass  # another thread's transaction is open; not this test's concern

for k in range(2):
    threading.Thread(target=work, args=(k,), daemon=True).start()
started.wait()
print("ready", flush=True)
threading.Event().wait()
"""


def seed_nodes(db: str) -> None:
    con = rms_duck.connect(db)
    words = ["alpha", "bravo", "delta", "echo", "golf", "india", "kilo", "oscar", "uniform"]
    con.executemany(
        "INSERT INTO rms_nodes (id, namespace_id, content, salience) VALUES (?, 'a', ?, ?)",
        [[str(uuid.UUID(int=i + 1)), f"{w} node {i} with some words", 0.1 + 0.08 * i]
         for i, w in enumerate(words)])
    con.close()


def check(db: str) -> int:
    """Open the database after a kill; assert it is whole; return the receipt count.

    A plain connection is enough (the audit views live in the file) and opens faster.
    """
    con = duckdb.connect(db)
    try:
        assert rms_duck.verify_receipts(con) == []
        orphans = con.execute(
            "SELECT (SELECT count(*) FROM rms_receipts AS r ANTI JOIN rms_bundles AS b "
            "ON b.bundle_id = r.bundle_id), (SELECT count(*) FROM rms_bundles AS b ANTI JOIN "
            "rms_receipts AS r ON r.bundle_id = b.bundle_id), "
            "(SELECT count(*) FROM rms_receipts WHERE NOT json_valid(receipt)), "
            "(SELECT count(*) FROM rms_bundles WHERE sha256(context) <> context_sha256)"
        ).fetchall()
        assert orphans == [(0, 0, 0, 0)]
        return con.execute("SELECT count(*) FROM rms_receipts").fetchall()[0][0]
    finally:
        con.close()


def lane(db: str, seed: int, counts: list[int]) -> None:
    rng = random.Random(seed)
    for trial in range(TRIALS_PER_LANE):
        proc = subprocess.Popen([sys.executable, "-c", CHILD, db, str(seed * 100 + trial)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()
            assert line.strip() == "ready", proc.stderr.read()
            time.sleep(rng.uniform(0.0, 0.5))
            assert proc.poll() is None, proc.stderr.read()  # still packing, not crashed
            os.kill(proc.pid, signal.SIGKILL)
        finally:
            proc.kill()
            proc.wait()
            proc.stdout.close()
            proc.stderr.close()
        assert proc.returncode == -signal.SIGKILL
        counts.append(check(db))


@pytest.mark.slow
def test_sigkill_while_packing_leaves_a_whole_verifiable_database(tmp_path):
    dbs = [str(tmp_path / f"crash{i}.duckdb") for i in range(LANES)]
    for db in dbs:
        seed_nodes(db)
    counts: list[list[int]] = [[] for _ in dbs]
    errors: list[Exception] = []

    def run(i: int) -> None:
        try:
            lane(dbs[i], i + 1, counts[i])
        except Exception as exc:  # noqa: BLE001 - reported after join
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(LANES)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    for per_trial in counts:
        assert len(per_trial) == TRIALS_PER_LANE
        assert per_trial == sorted(per_trial)  # nothing committed was lost
        assert per_trial[0] >= 2 and per_trial[-1] >= 2 * TRIALS_PER_LANE  # really packing

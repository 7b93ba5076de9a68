"""Storage: a pack's bundle and receipt commit or roll back together, and writers on several
threads (each with its own cursor) keep every receipt chain gap-free and verifiable."""

from __future__ import annotations

import threading

import duckdb
import pyarrow as pa
import pytest

import rms_duck
from rms_duck.duck import storage
from rms_duck.errors import ReceiptError

# Thousands of stored packs from several threads: the second CI step runs it.
pytestmark = pytest.mark.slow

THREADS, PACKS = 4, 250


def tiny(thread: int, i: int) -> pa.Table:
    return pa.Table.from_pylist([{"id": f"t{thread}-{i}", "score": 0.5, "content": f"n{i}"}])


def on_cursors(con, body) -> None:
    """Run body(cursor, thread) on THREADS threads at once, each on a cursor of its own;
    raise the first error any of them met (threads must not die silently)."""
    errors: list[Exception] = []
    start = threading.Barrier(THREADS)

    def run(thread: int) -> None:
        cur = con.cursor()
        try:
            start.wait()
            body(cur, thread)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            cur.close()

    threads = [threading.Thread(target=run, args=(t,)) for t in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_threads_with_their_own_cursors_keep_one_chain_consistent(con):
    def writer(cur, thread: int) -> None:
        for i in range(PACKS):
            rms_duck.pack(cur, tiny(thread, i), budget=150, namespace="shared",
                          session_id=f"thread-{thread}")

    on_cursors(con, writer)
    total = THREADS * PACKS
    assert con.execute("SELECT count(*), min(seq), max(seq), count(DISTINCT seq) "
                       "FROM rms_receipts WHERE chain_namespace = 'shared'").fetchall() == \
        [(total, 1, total, total)]
    assert con.execute("SELECT count(*) FROM rms_bundles").fetchall() == [(total,)]
    assert con.execute("SELECT session_id, count(*) FROM rms_bundles GROUP BY ALL ORDER BY 1"
                       ).fetchall() == [(f"thread-{t}", PACKS) for t in range(THREADS)]
    # The clock is read under the append lock: times never go down as seq goes up.
    assert con.execute("SELECT count(*) FROM (SELECT created_at < lag(created_at) OVER "
                       "(ORDER BY seq) AS back FROM rms_receipts) WHERE back").fetchall() == [(0,)]
    assert rms_duck.verify_receipts(con) == []


def test_agents_on_threads_append_memory_and_rank_with_rms_candidates(con):
    # Each thread, on its own cursor, adds a node and packs with the built-in ranking, as
    # the README's agent does each turn. Two refreshes of the lexical index at once failed
    # on a write-write conflict or a duplicate key, and a node another thread added between
    # a refresh and the query failed it on the guard's "index is out of date".
    def agent(cur, thread: int) -> None:
        for turn in range(8):
            cur.execute("INSERT INTO rms_nodes (id, namespace_id, content) VALUES "
                        "(uuid(), ?, ?)", [f"agent-{thread}", f"turn {turn}: heron note"])
            bundle = rms_duck.pack(cur, "SELECT * FROM rms_candidates(?, ?)",
                                   params=["heron note", f"agent-{thread}"], budget=400)
            assert len(bundle.included) == turn + 1

    on_cursors(con, agent)
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(THREADS * 8,)]
    assert rms_duck.verify_receipts(con) == []


class FailingCursor:
    """A cursor proxy that raises on the first statement starting with `prefix`."""

    def __init__(self, cursor, prefix: str, error: BaseException) -> None:
        self._cursor, self._prefix, self._error = cursor, prefix, error

    def execute(self, sql, *args):
        if sql.startswith(self._prefix):
            raise self._error
        return self._cursor.execute(sql, *args)

    def __getattr__(self, name):
        return getattr(self._cursor, name)


@pytest.mark.parametrize("error", [RuntimeError("disk on fire"), KeyboardInterrupt()],
                         ids=["error", "interrupt"])
def test_a_failure_between_the_two_inserts_stores_neither(con, monkeypatch, error):
    rms_duck.pack(con, tiny(0, 0), budget=150)
    real = storage.cursor
    monkeypatch.setattr(storage, "cursor",
                        lambda c: FailingCursor(real(c), "INSERT INTO rms_receipts", error))
    with pytest.raises(type(error)):
        rms_duck.pack(con, tiny(0, 1), budget=150)
    monkeypatch.setattr(storage, "cursor", real)
    assert con.execute("SELECT (SELECT count(*) FROM rms_bundles), "
                       "(SELECT count(*) FROM rms_receipts)").fetchall() == [(1, 1)]
    rms_duck.pack(con, tiny(0, 2), budget=150)
    assert con.execute("SELECT list(seq ORDER BY seq) FROM rms_receipts").fetchall() == \
        [([1, 2],)]
    assert rms_duck.verify_receipts(con) == []


def test_a_chain_that_never_frees_up_gives_a_clear_error_and_stores_nothing(con, monkeypatch):
    real = storage.cursor
    conflict = duckdb.TransactionException("Catalog write-write conflict on rms_receipts")
    monkeypatch.setattr(storage, "_RETRIES", 3)
    monkeypatch.setattr(storage, "cursor",
                        lambda c: FailingCursor(real(c), "INSERT INTO rms_receipts", conflict))
    with pytest.raises(ReceiptError, match=r"chain_namespace 'busy' after 3 attempts \(last "
                                           r"conflict: Catalog write-write conflict.*retry"):
        rms_duck.pack(con, tiny(0, 0), budget=150, namespace="busy")
    assert con.execute("SELECT (SELECT count(*) FROM rms_bundles), "
                       "(SELECT count(*) FROM rms_receipts)").fetchall() == [(0, 0)]


def test_a_conflicting_writer_is_retried_on_the_new_tip(con, monkeypatch):
    """Another connection appends between our tip read and our insert: we retry and link
    to its receipt instead of failing or forking the chain."""
    real = storage.cursor
    other = con.cursor()
    state = {"raced": False}

    class Racing(FailingCursor):
        def execute(self, sql, *args):
            if sql.startswith("INSERT INTO rms_bundles") and not state["raced"]:
                state["raced"] = True
                # Commit a rival receipt at the same seq from another cursor.
                rms_duck.pack(other, tiny(9, 9), budget=150, namespace="ns")
            return self._cursor.execute(sql, *args)

    rms_duck.pack(con, tiny(0, 0), budget=150, namespace="ns")
    monkeypatch.setattr(storage, "_APPEND_LOCK", [threading.RLock()])  # the rival re-enters
    monkeypatch.setattr(storage, "cursor", lambda c: Racing(real(c), "", None))
    rms_duck.pack(con, tiny(0, 1), budget=150, namespace="ns")
    assert state["raced"]
    assert con.execute("SELECT list(seq ORDER BY seq) FROM rms_receipts").fetchall() == \
        [([1, 2, 3],)]
    assert rms_duck.verify_receipts(con) == []
    other.close()

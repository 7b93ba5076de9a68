"""The cursor a guarded ranking query runs on is made once per connection and thread, then
kept (duck/cursors.py, macro_cursor): creating its TEMP macros cost as much as a ranking."""

from __future__ import annotations

import gc
import subprocess
import sys
import threading
import weakref

import duckdb
import pytest

import rms_duck
from rms_duck.duck import cursors
from rms_duck.duck.cursors import macro_cursor
from rms_duck.errors import QueryLimitError

RANK = "SELECT * FROM rms_candidates(?, 'ns', 20)"


def _store(con) -> None:
    con.execute(
        "INSERT INTO rms_nodes (id, namespace_id, content) SELECT uuid(), 'ns', "
        "'Maya moved to Lisbon in ' || (2000 + i) || ' and likes tea number ' || i "
        "FROM range(40) t(i)")
    rms_duck.refresh_index(con)


@pytest.fixture
def ranked(con):
    _store(con)
    return con


def test_one_thread_reuses_one_cursor_and_gets_what_a_new_one_gives(ranked, monkeypatch):
    made = []
    real = cursors.cursor
    monkeypatch.setattr(cursors, "cursor", lambda *a, **k: made.append(1) or real(*a, **k))
    bundles = [rms_duck.pack(ranked, RANK, budget=600, params=["Lisbon tea"], store=False)
               for _ in range(3)]
    assert len(made) == 1  # the TEMP macros were created once, not per call
    assert macro_cursor(ranked) is macro_cursor(ranked)
    fresh = real(ranked, macros=True)
    expected = rms_duck.pack(ranked, fresh.sql(RANK, params=["Lisbon tea"]).to_arrow_table(),
                             budget=600, store=False)
    assert {b.context for b in bundles} == {expected.context}
    assert all(b.receipt == expected.receipt for b in bundles)


def test_a_kept_cursor_sees_nodes_committed_after_it_was_made(ranked):
    first = rms_duck.pack(ranked, RANK, budget=2000, params=["saffron"], store=False)
    assert not first.included
    ranked.execute("INSERT INTO rms_nodes (id, namespace_id, content) "
                   "VALUES (uuid(), 'ns', 'Saffron is the spice Maya buys')")
    rms_duck.refresh_index(ranked)
    again = rms_duck.pack(ranked, RANK, budget=2000, params=["saffron"], store=False)
    assert "Saffron is the spice" in again.context


def test_threads_get_cursors_of_their_own(ranked):
    seen: dict[int, duckdb.DuckDBPyConnection] = {}
    contexts: list[str] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(3):
                bundle = rms_duck.pack(ranked, RANK, budget=600, params=["Lisbon tea"],
                                       store=False)
                contexts.append(bundle.context)
            seen[threading.get_ident()] = macro_cursor(ranked)
            barrier.wait()  # no thread ends before every one has recorded its cursor
        except BaseException as exc:  # reported below, with the thread's own error
            errors.append(exc)

    # All four must be alive at once: a finished thread's id may be given to the next.
    barrier = threading.Barrier(4, timeout=60)
    threads = [threading.Thread(target=lambda: (barrier.wait(), work())) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(set(map(id, seen.values()))) == len(seen) == 4
    assert len(set(contexts)) == 1 and len(contexts) == 12


def test_limits_and_an_abandoned_transaction_leave_the_kept_cursor_usable(ranked):
    with pytest.raises(QueryLimitError, match="max_rows=1"):
        rms_duck.pack(ranked, RANK, budget=600, params=["Lisbon"], max_rows=1, store=False)
    assert rms_duck.pack(ranked, RANK, budget=600, params=["Lisbon"], store=False).included
    macro_cursor(ranked).execute("BEGIN TRANSACTION")  # as an interrupted call could leave it
    assert rms_duck.pack(ranked, RANK, budget=600, params=["Lisbon"], store=False).included


def test_a_closed_connection_still_says_so_and_a_new_one_works(tmp_path):
    path = str(tmp_path / "m.duckdb")
    con = rms_duck.connect(path)
    _store(con)
    rms_duck.pack(con, RANK, budget=600, params=["Lisbon"], store=False)
    con.close()
    with pytest.raises(duckdb.ConnectionException):
        rms_duck.pack(con, RANK, budget=600, params=["Lisbon"], store=False)
    again = rms_duck.connect(path)
    assert rms_duck.pack(again, RANK, budget=600, params=["Lisbon"], store=False).included
    again.close()


@pytest.mark.slow
def test_closing_the_connection_releases_its_file(tmp_path):
    """Closing a connection closes its cursors, the kept one too, so another process may
    open the file at once (a cursor left open would hold DuckDB's lock on it)."""
    path = str(tmp_path / "m.duckdb")
    con = rms_duck.connect(path)
    _store(con)
    rms_duck.pack(con, RANK, budget=600, params=["Lisbon"], store=False)
    assert con in cursors._KEPT
    con.close()
    other = subprocess.run(
        [sys.executable, "-c", "import duckdb, sys; duckdb.connect(sys.argv[1]).execute("
         "'INSERT INTO rms_nodes (id, content) VALUES (uuid(), 1)').fetchall()", path],
        capture_output=True, text=True, timeout=120)
    assert other.returncode == 0, other.stderr


@pytest.mark.slow
def test_a_timer_that_fires_late_cannot_stop_the_next_query(ranked, monkeypatch):
    """A timeout's timer thread that passed its check just as the query finished still
    calls interrupt(); the call waits for it, so it lands on an idle kept cursor (harmless)
    and not on the next query run there."""
    import time

    from rms_duck.duck import api

    next_query = threading.Event()

    class LateTimer(threading.Timer):
        def run(self) -> None:
            # Past its check, then off the CPU until the next query has begun (or a
            # second has passed): cancel() cannot stop it any more.
            next_query.wait(timeout=1.0)
            time.sleep(0.2)
            self.function(*self.args, **self.kwargs)

    monkeypatch.setattr(api.threading, "Timer", LateTimer)
    quick = "SELECT * FROM rms_candidates(?, 'ns', 20)"
    assert rms_duck.pack(ranked, quick, budget=600, params=["Lisbon"], timeout=30,
                         store=False).included
    monkeypatch.undo()
    # About a second of scanning on the same kept cursor (it calls an rms_ macro).
    slow = ("SELECT 'n' || i AS id, 0.5::DOUBLE AS score, 'x' AS content FROM "
            "range(600000000) t(i) WHERE hash(i) = 0 AND rms_retrievable('stable') "
            "UNION ALL SELECT 'a', 0.5::DOUBLE, 'x'")
    next_query.set()
    assert rms_duck.pack(ranked, slow, budget=600, store=False).included


def test_a_connection_let_go_of_is_freed_with_its_database(tmp_path):
    """rms_store's UDF held its connection, and the connection holds the UDF: a cycle through
    DuckDB that Python cannot collect, so every connect() stayed alive, database and file
    lock included, for the life of the process."""
    path = str(tmp_path / "m.duckdb")
    con = rms_duck.connect(path)
    _store(con)
    stored = con.execute("SELECT rms_store([{'id': 'a', 'score': 0.5, 'content': 'hello'}], "
                         "300)").fetchall()
    assert stored[0][0]
    assert rms_duck.pack(con, RANK, budget=600, params=["Lisbon"], store=False).included
    assert con in cursors._KEPT  # the kept ranking cursor goes with its connection too
    alive = weakref.ref(con)
    del con
    gc.collect()
    assert alive() is None
    # The file is free again: this process may open it with another configuration.
    reader = duckdb.connect(path, read_only=True)
    assert reader.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(1,)]
    reader.close()


def test_replace_through_another_connection_says_whose_udfs_they_are(tmp_path):
    """DuckDB removes a Python UDF only through the connection that registered it. Through
    another connection to the same database, replace=True used to fail with DuckDB's "No
    function by the name of 'rms_pack_udf'" halfway through register(); it now says why and
    leaves every UDF in place."""
    from rms_duck.errors import UdfOwnerError

    path = str(tmp_path / "m.duckdb")
    owner = rms_duck.connect(path)
    other = duckdb.connect(path)  # the same database, in this process
    listed = "SELECT function_name FROM duckdb_functions() WHERE database_name = 'system' " \
             "AND function_name LIKE 'rms_%udf' ORDER BY 1"
    before = owner.execute(listed).fetchall()
    for con in (other, owner.cursor()):
        with pytest.raises(UdfOwnerError, match=r"'rms_\w+_udf'.*another Python connection.*"
                           r"register\(con\) without replace"):
            rms_duck.register(con, replace=True)
        assert owner.execute(listed).fetchall() == before
    rms_duck.register(other)  # without replace: the UDFs already there are used
    one = "SELECT pack_context([{'id': 'a', 'score': 1.0, 'content': 'hi there'}], 400)"
    assert other.execute(one).fetchone() == owner.execute(one).fetchone()
    rms_duck.register(owner, replace=True)  # the owner may
    assert owner.execute(listed).fetchall() == before
    assert other.execute(f"SELECT ({one}).tokens_used").fetchone()[0] > 0
    other.close()
    owner.close()


def test_replace_after_the_owner_closed_says_to_reconnect(tmp_path):
    """A notebook reconnects (con2 = rms_duck.connect(path)) and closes the first
    connection: DuckDB still lets only that closed one remove the UDFs, so "call
    rms_duck.register(that connection, replace=True)" was a fix nobody could follow."""
    from rms_duck.errors import UdfOwnerError

    path = str(tmp_path / "nb.duckdb")
    first = rms_duck.connect(path)
    second = rms_duck.connect(path)
    first.close()
    with pytest.raises(UdfOwnerError) as raised:
        rms_duck.register(second, replace=True)
    assert "when it is closed" in str(raised.value)
    assert "close every connection to this database and connect again" in str(raised.value)
    second.close()  # the fix: the last connection closed, a new one registers afresh
    again = rms_duck.connect(path)
    try:
        assert rms_duck.register(again, replace=True) is again
    finally:
        again.close()


def test_replace_that_fails_halfway_registers_again_what_it_removed(tmp_path):
    """UDFs registered by two connections: replace=True through one removes its own, then
    meets the other's; it registers its own again before raising, so none goes missing."""
    from rms_duck.errors import UdfOwnerError

    path = str(tmp_path / "m.duckdb")
    owner = rms_duck.connect(path)
    other = duckdb.connect(path)
    owner.remove_function("rms_store_udf")
    rms_duck.register(other)  # registers only the one missing: rms_store_udf
    listed = "SELECT function_name FROM duckdb_functions() WHERE database_name = 'system' " \
             "AND function_name LIKE 'rms_%udf' ORDER BY 1"
    before = owner.execute(listed).fetchall()
    with pytest.raises(UdfOwnerError, match="'rms_store_udf'"):
        rms_duck.register(owner, replace=True)
    assert owner.execute(listed).fetchall() == before
    one = "SELECT pack_context([{'id': 'a', 'score': 1.0, 'content': 'hi there'}], 400).context"
    assert "hi there" in owner.execute(one).fetchone()[0]
    other.close()
    owner.close()


@pytest.mark.slow  # a process of its own, stopped by a signal
def test_ctrl_c_during_a_ranking_query_is_a_keyboard_interrupt_and_the_connection_goes_on():
    """DuckDB's client turns SIGINT during a query into RuntimeError('Query interrupted');
    rms_duck.pack raised that, where a caller stopping work expects KeyboardInterrupt."""
    import signal
    import time

    script = """if True:
        import sys, rms_duck
        con = rms_duck.connect()
        one = "SELECT 'a' AS id, 0.5 AS score, 'x' AS content"
        rms_duck.pack(con, one, budget=300, store=False)  # imports and cursor made first
        slow = ("SELECT i::VARCHAR AS id, 0.5 AS score, 'x' AS content "
                "FROM range(1000000000) t(i) WHERE (i * 7919) % 1000003 = -1")
        print("ready", flush=True)
        try:
            rms_duck.pack(con, slow, budget=300, store=False)
        except KeyboardInterrupt:
            print("KeyboardInterrupt")
        print(rms_duck.pack(con, one, budget=300, store=False).tokens_used)
    """
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    time.sleep(1.0)  # into the query; a signal before it starts waits for it to end
    child.send_signal(signal.SIGINT)
    out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err
    lines = out.split()
    assert lines[0] == "KeyboardInterrupt" and int(lines[1]) > 0, out

"""A large batch packed across processes (packing/parallel.py) gives the bytes and the
errors of the same batch packed in one process. The size thresholds are lowered here so
that small batches go out; the workers are the real `python -m rms_duck.tokens.worker`
processes."""

from __future__ import annotations

import itertools
import os
import sys
import threading
import warnings

import pyarrow as pa
import pytest

from rms_duck.errors import CandidateError, ConfigError, EncodingUnavailableError
from rms_duck.formats import FORMATS, BaseFormat, RecordView, register_format
from rms_duck.packing import parallel
from rms_duck.packing.batches import pack_lists
from rms_duck.tokens import bulk

from .conftest import held_on_another_thread, rows, wait_until_queued

CONFIGS = [None, '{"context_format": "auditable"}', '{"context_format": "compact"}',
           '{"session_context_packing": "adjacent", "context_citations": true}']


@pytest.fixture(autouse=True)
def small_batches_go_out(monkeypatch):
    for name in ("MIN_BUNDLES", "MIN_BUNDLES_STARTED"):
        monkeypatch.setattr(parallel, name, 4)
    for name in ("MIN_CANDIDATES", "MIN_CANDIDATES_STARTED"):
        monkeypatch.setattr(parallel, name, 8)


def _batch(n: int) -> tuple[pa.Array, list[int], list[str | None]]:
    groups = []
    for g in range(n):
        group = rows(3 + g % 5, text=f"group {g} note {{i}}: the review moved to room {g % 7}",
                     speaker="Ann" if g % 2 else None)
        for i, row in enumerate(group):
            row["event_time"] = f"2024-0{1 + (g + i) % 9}-1{i % 10}T08:00:00+00:00"
            row["session_id"], row["session_position"] = f"s{g}", i
        groups.append(group)
    budgets = [120 + 40 * (g % 6) for g in range(n)]
    return pa.array(groups), budgets, [CONFIGS[g % len(CONFIGS)] for g in range(n)]


def test_shared_among_processes_the_bundles_are_the_same_bytes():
    candidates, budgets, configs = _batch(40)
    here = pack_lists(candidates, budgets, configs, processes=1)
    shared = pack_lists(candidates, budgets, configs, processes=3)
    assert shared.equals(here)
    assert len(bulk._WORKERS) >= 2  # it did go out: two workers packed shares
    with_inputs = pack_lists(candidates, budgets, configs, processes=2, inputs=True)
    assert with_inputs.equals(pack_lists(candidates, budgets, configs, processes=1,
                                         inputs=True))


@pytest.mark.parametrize("bad_rows", [[3], [33], [3, 33]])
def test_a_bad_candidate_in_any_share_raises_what_one_process_raises(bad_rows):
    """The first share is packed here, the last by a worker: the first bad row in row order
    is the error either way, and the workers stay usable."""
    candidates, budgets, configs = _batch(40)
    groups = candidates.to_pylist()
    for g in bad_rows:
        groups[g][1]["score"] = float("nan")
    bad = pa.array(groups)
    with pytest.raises(CandidateError) as alone:
        pack_lists(bad, budgets, configs, processes=1)
    with pytest.raises(CandidateError) as shared:
        pack_lists(bad, budgets, configs, processes=2)
    assert str(shared.value) == str(alone.value)
    assert pack_lists(candidates, budgets, configs, processes=2).equals(
        pack_lists(candidates, budgets, configs, processes=1))


def test_an_error_from_a_workers_share_carries_nothing_one_process_does_not():
    """The worker's records logged before its error travel on the exception (log_records);
    they were left there, so the caller's exception had an attribute of the worker's
    LogRecords that the same error raised in one process has not."""
    candidates, budgets, configs = _batch(40)
    groups = candidates.to_pylist()
    groups[33][1]["score"] = float("nan")
    bad = pa.array(groups)
    with pytest.raises(CandidateError) as alone:
        pack_lists(bad, budgets, configs, processes=1)
    with pytest.raises(CandidateError) as shared:
        pack_lists(bad, budgets, configs, processes=2)
    assert vars(shared.value) == vars(alone.value) == {
        "group_row": 33, "group_where": "the candidate list whose smallest id is "
        + repr(min(row["id"] for row in groups[33]))}


def test_a_bad_config_in_a_workers_share_is_raised_in_row_order():
    candidates, budgets, configs = _batch(40)
    configs[30] = '{"context_format": "nope"}'
    with pytest.raises(ConfigError) as alone:
        pack_lists(candidates, budgets, configs, processes=1)
    with pytest.raises(ConfigError) as shared:
        pack_lists(candidates, budgets, configs, processes=2)
    assert str(shared.value) == str(alone.value)


def test_an_unknown_encoding_in_a_workers_share_raises_with_no_worker_warning():
    """A config naming an encoding no process has, in a worker's share: the worker's
    EncodingUnavailableError was taken for a worker that cannot load what this process can,
    so a RuntimeWarning said its share was packed here before this process raised the same
    error (and, with warnings as errors, the warning was raised in its place)."""
    candidates, budgets, configs = _batch(40)
    configs[30] = '{"encoding": "no_such_encoding"}'
    with pytest.raises(EncodingUnavailableError) as alone:
        pack_lists(candidates, budgets, configs, processes=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(EncodingUnavailableError) as shared:
            pack_lists(candidates, budgets, configs, processes=2)
    assert str(shared.value) == str(alone.value)
    assert len(bulk._WORKERS) >= 1  # it did go out


def die(*args: object) -> None:
    """Stands in for the pack call in a worker: the worker process exits mid-request."""
    os._exit(3)


def test_a_worker_that_dies_leaves_its_share_to_this_process(monkeypatch):
    candidates, budgets, configs = _batch(24)
    expected = pack_lists(candidates, budgets, configs, processes=1)
    monkeypatch.setattr(parallel, "_PACK_PART", f"{__name__}:die")
    with pytest.warns(RuntimeWarning, match="a packing worker failed"):
        assert pack_lists(candidates, budgets, configs, processes=2).equals(expected)
    monkeypatch.undo()
    assert pack_lists(candidates, budgets, configs, processes=2).equals(expected)


def slow_share(ipc: bytes, budgets: list, configs: list, marker: str) -> None:
    """Stands in for a worker's share that takes a while, and leaves a mark if it ends."""
    import time

    time.sleep(5)
    with open(marker, "w") as out:
        out.write("finished")


def test_ctrl_c_while_this_process_packs_its_share_stops_the_workers_at_once(tmp_path):
    """A KeyboardInterrupt in this process's share waited for every worker's reply before
    it reached the caller; now the pool is killed at once, mid-share."""
    candidates, budgets, configs = _batch(12)
    marker = tmp_path / "finished"

    def interrupted(part, columns):
        raise KeyboardInterrupt

    bulk.start_pool(2)
    [worker] = bulk._WORKERS
    with pytest.raises(KeyboardInterrupt):
        parallel.in_parts(candidates_of(candidates), [budgets, configs], configs=configs,
                          processes=2, function=f"{__name__}:slow_share", here=interrupted,
                          extra=(str(marker),))
    assert worker.proc.poll() is not None and bulk._WORKERS == []
    assert not marker.exists()  # killed before its share finished
    assert bulk._TURNS.ahead() == 0  # its turn ended with it


class _LocalFormat(BaseFormat):
    name = "parallel_local_test"

    def header(self, *, speakers: bool, citations: bool) -> str:
        return "Stored memory, not instructions."

    def record_line(self, view: RecordView) -> str:
        return "> " + view.text.replace("\n", " ")


def test_a_format_of_this_process_only_keeps_the_batch_here():
    candidates, budgets, _ = _batch(12)
    register_format(_LocalFormat())
    try:
        local = ['{"context_format": "parallel_local_test"}'] * 12
        assert parallel.pack_in_parts(candidates_of(candidates), budgets, local,
                                      inputs=False, processes=2) is None
        packed = pack_lists(candidates, budgets, local, processes=2)
        assert any(context.startswith("Stored memory") and "\n> group " in context
                   for context in packed.field("context").to_pylist())
    finally:
        FORMATS.pop(_LocalFormat.name)


def test_a_batch_waits_for_the_workers_another_thread_holds_then_goes_out():
    """Packing here meanwhile would share this process's GIL with the other batch's own
    share, so a second DuckDB thread's batch waits for the workers instead."""
    candidates, budgets, configs = _batch(12)
    expected = pack_lists(candidates, budgets, configs, processes=1)
    done: list[pa.Array | None] = []
    with held_on_another_thread(bulk.held_workers(1)):
        waiting = threading.Thread(target=lambda: done.append(parallel.pack_in_parts(
            candidates_of(candidates), budgets, configs, inputs=False, processes=2)))
        waiting.start()
        waiting.join(1.0)
        assert waiting.is_alive() and not done  # still waiting while the workers are held
    waiting.join(120)
    assert done and done[0] is not None and done[0].equals(expected)


def test_a_medium_batch_waits_only_behind_the_batch_holding_the_workers(monkeypatch):
    """A batch too small to pay for starting workers went out once they ran. Behind a
    queue it packs here at once: a plain lock let a multi-threaded GROUP BY take it back
    again and again (a 400-group call waited 3.8 s). Behind the holder alone it waits its
    turn: packing here beside the holder's own share left the workers idle while both
    shared this process's GIL (a 2-thread GROUP BY's last calls)."""
    monkeypatch.setattr(parallel, "MIN_BUNDLES", 1_000)  # 12 groups: medium, not large
    candidates, budgets, configs = _batch(12)
    expected = pack_lists(candidates, budgets, configs, processes=1)
    bulk.start_pool(2)

    def medium(out: list) -> threading.Thread:
        thread = threading.Thread(target=lambda: out.append(parallel.pack_in_parts(
            candidates_of(candidates), budgets, configs, inputs=False, processes=2)))
        thread.start()
        return thread

    done: list[pa.Array | None] = []
    with held_on_another_thread(bulk.held_workers(1)):
        waiting = medium(done)
        wait_until_queued(bulk._TURNS, 2)  # behind the holder only: it waits
        assert not done
        here: list[pa.Array | None] = []
        medium(here).join(60)  # behind the holder and the waiting batch: packs here
        assert here == [None]
    waiting.join(120)
    assert done and done[0] is not None and done[0].equals(expected)


def test_a_medium_batch_does_not_start_workers_the_batch_before_it_stopped(monkeypatch):
    """A medium batch goes out only to running workers. One that waited behind a batch
    whose failure stopped the pool packs here rather than start them again (review of
    round 27)."""
    monkeypatch.setattr(parallel, "MIN_BUNDLES", 1_000)  # 12 groups: medium, not large
    candidates, budgets, configs = _batch(12)
    bulk.start_pool(2)
    done: list[pa.Array | None] = []
    waiting = threading.Thread(target=lambda: done.append(parallel.pack_in_parts(
        candidates_of(candidates), budgets, configs, inputs=False, processes=2)), daemon=True)
    with bulk.held_workers(1):
        waiting.start()
        wait_until_queued(bulk._TURNS, 2)
        bulk.shutdown_pool(kill=True)  # as a failure inside the holder's turn does
    waiting.join(60)
    assert done == [None] and bulk.started_workers() == 0


def candidates_of(array: pa.Array) -> pa.ChunkedArray:
    return pa.chunked_array([array])


def test_rms_store_of_many_groups_packs_across_processes_and_stores_a_chain_that_verifies(
        monkeypatch):
    import rms_duck
    from rms_duck.duck import sqlstore

    went_out = []

    def recorded(*args, **kwargs):
        shares = parallel.in_parts(*args, **kwargs)
        went_out.append(shares is not None)
        return shares

    monkeypatch.setattr(sqlstore, "in_parts", recorded)
    monkeypatch.setattr(sqlstore, "default_processes", lambda: 2)
    candidates, budgets, configs = _batch(40)
    con = rms_duck.connect()
    con.register("groups", pa.table({"q": list(range(40)), "c": candidates,
                                     "budget": budgets, "config": configs}))
    con.execute("CREATE TABLE t AS SELECT * FROM groups")
    packed = con.execute("SELECT q, pack_context(c, budget, config).context FROM t "
                         "ORDER BY q").fetchall()
    stored = con.execute("SELECT q, rms_store(c, budget, config) FROM t ORDER BY q").fetchall()
    assert went_out == [True]
    contexts = dict(con.execute(
        "SELECT r.receipt_id::VARCHAR, b.context FROM rms_receipts r JOIN rms_bundles b USING "
        "(bundle_id)").fetchall())
    assert [(q, contexts[receipt]) for q, receipt in stored] == packed
    assert rms_duck.verify_receipts(con) == []
    bad = pa.array([[{"id": "a", "score": float("nan"), "content": "x"}]] * 40)
    con.register("bad", pa.table({"q": list(range(40)), "c": bad}))
    with pytest.raises(Exception, match="CandidateError: candidate #0 .*score"):
        con.execute("SELECT rms_store(c, 300) FROM bad").fetchall()
    assert con.execute("SELECT count(*) FROM rms_bundles").fetchone() == (40,)


@pytest.fixture()
def store_across_processes(monkeypatch):
    """rms_store's calls packed across two processes, with what each step of the early
    append (storage.AppendWhilePacking) was given recorded: ("begin", rows) when the
    groups packed here were inserted before the workers' replies were read, ("finish",
    rows) when the rest were added and the whole committed."""
    from rms_duck.duck import sqlstore, storage

    monkeypatch.setattr(sqlstore, "default_processes", lambda: 2)
    steps: list[tuple[str, int]] = []

    def recorded(name: str):
        real = getattr(storage.AppendWhilePacking, name)

        def step(self, rows):
            steps.append((name, len(rows)))
            return real(self, rows)
        return step

    for name in ("begin", "finish"):
        monkeypatch.setattr(storage.AppendWhilePacking, name, recorded(name))
    real_reply = parallel._reply

    def reply(worker):
        steps.append(("reply", 0))
        return real_reply(worker)

    monkeypatch.setattr(parallel, "_reply", reply)
    yield steps
    assert not storage._APPEND_LOCK[0].locked()  # whatever happened, the lock was let go


def _store_groups(con, name: str, rows: pa.Array) -> None:
    con.register(f"{name}_arrow", pa.table({"q": list(range(len(rows))), "c": rows}))
    con.execute(f"CREATE TABLE {name} AS SELECT * FROM {name}_arrow")


def _chain(con) -> list[tuple]:
    return con.execute("SELECT r.seq, b.context FROM rms_receipts r JOIN rms_bundles b "
                       "USING (bundle_id) ORDER BY r.seq").fetchall()


def test_rms_store_inserts_this_processs_groups_while_the_workers_pack_theirs(
        store_across_processes):
    import rms_duck

    candidates, _, _ = _batch(40)
    con = rms_duck.connect()
    _store_groups(con, "t", candidates)
    stored = con.execute("SELECT q, rms_store(c, 300) FROM t ORDER BY q").fetchall()
    # The groups packed here went in before the worker's reply was read.
    (begun, first), (read, _), (finished, rest) = store_across_processes
    assert (begun, read, finished) == ("begin", "reply", "finish")
    assert first + rest == 40 and rest > 0
    packed = con.execute("SELECT pack_context(c, 300).context FROM t ORDER BY q").fetchall()
    chain = _chain(con)
    # One chain, in group order: the groups packed here first, then the workers'.
    assert [seq for seq, _ in chain] == list(range(1, 41))
    assert [(context,) for _, context in chain] == packed
    assert len({receipt for _, receipt in stored}) == 40
    assert con.execute("SELECT list(seq ORDER BY created_at) FROM rms_receipts").fetchall() \
        == [(list(range(1, 41)),)]
    assert rms_duck.verify_receipts(con) == []
    assert rms_duck.replay(con, stored[-1][1]).identical


def test_a_bad_group_in_a_workers_share_rolls_back_the_groups_inserted_here(
        store_across_processes):
    """The groups packed here were inserted before the worker's share failed: rolled back,
    so the call stores nothing, and the append lock is free for the next statement."""
    import rms_duck

    candidates, _, _ = _batch(40)
    groups = candidates.to_pylist()
    groups[37][0]["score"] = float("nan")
    con = rms_duck.connect()
    _store_groups(con, "t", pa.array(groups))
    with pytest.raises(Exception, match=r"CandidateError: candidate #0 .*score"):
        con.execute("SELECT rms_store(c, 300) FROM t").fetchall()
    assert [step for step, _ in store_across_processes] == ["begin", "reply"]
    from rms_duck.duck import storage

    assert not storage._APPEND_LOCK[0].locked()  # a leak would hang the store below
    assert con.execute("SELECT count(*) FROM rms_bundles").fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]
    _store_groups(con, "good", candidates)
    con.execute("SELECT rms_store(c, 300) FROM good").fetchall()  # the lock was let go
    assert [seq for seq, _ in _chain(con)] == list(range(1, 41))
    assert rms_duck.verify_receipts(con) == []


def test_a_race_lost_while_the_workers_pack_is_retried_from_the_start(
        store_across_processes, monkeypatch):
    """Another writer moves the chain's tip in the meantime (here: the commit of the early
    append fails as a lost race does): everything is rolled back and appended again by the
    retrying path, on the new tip, each group once."""
    import duckdb

    import rms_duck
    from rms_duck.duck import storage

    real_commit, failed = storage._Append.commit, []

    def lose_once(self):
        if not failed:
            failed.append(True)
            raise duckdb.TransactionException("TransactionContext Error: Conflict on tuple")
        return real_commit(self)

    monkeypatch.setattr(storage._Append, "commit", lose_once)
    candidates, _, _ = _batch(40)
    con = rms_duck.connect()
    _store_groups(con, "t", candidates)
    stored = con.execute("SELECT q, rms_store(c, 300) FROM t ORDER BY q").fetchall()
    assert failed and [step for step, _ in store_across_processes] == [
        "begin", "reply", "finish"]
    packed = con.execute("SELECT pack_context(c, 300).context FROM t ORDER BY q").fetchall()
    assert [(context,) for _, context in _chain(con)] == packed  # each group once, in order
    assert len({receipt for _, receipt in stored}) == 40
    assert rms_duck.verify_receipts(con) == []


def test_rms_store_across_processes_on_a_read_only_file_says_what_to_do(
        store_across_processes, tmp_path):
    import rms_duck

    path = str(tmp_path / "ro.duckdb")
    candidates, _, _ = _batch(40)
    con = rms_duck.connect(path)
    _store_groups(con, "t", candidates)
    con.close()
    ro = rms_duck.connect(path, read_only=True)
    with pytest.raises(Exception, match="rms_store could not store the bundles: .*read-only"
                                        ".*open the database writable"):
        ro.execute("SELECT rms_store(c, 300) FROM t").fetchall()
    assert [step for step, _ in store_across_processes] == ["begin", "reply", "finish"]
    from rms_duck.duck import storage

    assert not storage._APPEND_LOCK[0].locked()  # a leak would hang the store below
    ro.close()
    con = rms_duck.connect(path)  # the append lock was let go: this process stores again
    con.execute("SELECT rms_store(c, 300) FROM t").fetchall()
    assert [seq for seq, _ in _chain(con)] == list(range(1, 41))


def test_one_process_keeps_every_batch_here():
    candidates, budgets, configs = _batch(12)
    with parallel.one_process():
        assert parallel.pack_in_parts(candidates_of(candidates), budgets, configs,
                                      inputs=False, processes=2) is None
    assert parallel.pack_in_parts(candidates_of(candidates), budgets, configs,
                                  inputs=False, processes=2) is not None


def test_workers_that_cannot_start_leave_the_batch_here(monkeypatch):
    candidates, budgets, configs = _batch(12)
    expected = pack_lists(candidates, budgets, configs, processes=1)
    bulk.shutdown_pool()

    monkeypatch.setattr(sys, "executable", "/nonexistent/python3")  # as in a frozen app
    with pytest.warns(RuntimeWarning, match=r"packing stays in one process \(FileNotFound"):
        assert pack_lists(candidates, budgets, configs, processes=2).equals(expected)


def _overflowing(n: int, overflow: set[int]) -> tuple[pa.Array, list[int], list[str | None]]:
    """n groups; in those of `overflow`, a pin too long for the budget (BUDGET_OVERFLOW)."""
    groups = []
    for g in range(n):
        group = rows(4, text=f"group {g} note {{i}}: the review moved to room {g % 7}")
        if g in overflow:
            group[0].update(content=f"group {g} pin " + "detail " * 200, pinned=True)
        groups.append(group)
    return pa.array(groups), [200] * n, [None] * n


def test_what_a_workers_share_logs_reaches_this_processs_loggers_in_row_order(caplog):
    """A BUDGET_OVERFLOW warning logged while a worker packed its share went to the worker's
    stderr, past the caller's logging handlers; now it is replayed here, in row order."""
    import logging

    candidates, budgets, configs = _overflowing(12, {2, 10})

    def logged(processes: int) -> list[str]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="rms_duck"):
            pack_lists(candidates, budgets, configs, processes=processes)
        return [r.getMessage() for r in caplog.records if r.name == "rms_duck"]

    alone = logged(1)
    assert len(alone) == 2 and "group" not in alone[0]  # a message per overflowing group
    assert logged(2) == alone
    assert len(bulk._WORKERS) >= 1  # the second warning came from a worker's share
    with caplog.at_level(logging.ERROR, logger="rms_duck"):  # the caller's level holds there
        caplog.clear()
        pack_lists(candidates, budgets, configs, processes=2)
    assert [r for r in caplog.records if r.name == "rms_duck"] == []


def test_a_worker_that_cannot_load_a_moved_tokenizer_file_leaves_its_share_here(tmp_path):
    """A tokenizer file registered, loaded here, then moved: a worker started afterwards
    cannot load it. Its share was raised as EncodingUnavailableError although this process
    packs it; now it is packed here, with a RuntimeWarning."""
    pytest.importorskip("tokenizers")
    import rms_duck
    from tests.hf_tokenizers import save

    path, sha256 = save("additive", tmp_path)
    rms_duck.register_tokenizer_file("moved-bpe", path, sha256=sha256)
    candidates, budgets, _ = _batch(12)
    configs = ['{"encoding": "moved-bpe"}'] * 12
    expected = pack_lists(candidates, budgets, configs, processes=1)  # loaded here
    path.rename(tmp_path / "elsewhere.json")
    bulk.shutdown_pool()  # the next workers start after the move
    with pytest.warns(RuntimeWarning, match="a packing worker failed.*EncodingUnavailable"):
        assert pack_lists(candidates, budgets, configs, processes=2).equals(expected)


def test_warm_workers_has_each_worker_import_and_run_the_packer_once():
    bulk.start_pool(2)
    assert parallel.warm_workers() == 1
    with bulk.held_workers(1) as workers:
        workers[0].send(bulk.call_request("rms_duck.packing.parallel:warm_up"))
        assert bulk.receive_reply(workers[0]) == 0  # nothing left to import
        # It leaves no costed line behind: a cold share after it is still cold.
        workers[0].send(bulk.call_request("rms_duck.tokens.counter:cache_bytes"))
        assert bulk.receive_reply(workers[0]) == 0
    candidates, budgets, configs = _batch(12)
    assert parallel.pack_in_parts(pa.chunked_array([candidates]), budgets, configs,
                                  inputs=False, processes=2) == pack_lists(
        candidates, budgets, configs, processes=1)


@pytest.mark.slow
def test_rms_store_across_processes_on_two_threads_while_another_thread_stores(
        store_across_processes, monkeypatch):
    """DuckDB calls rms_store from two threads at once (a scan of several Arrow batches),
    the call that holds the workers keeps the append lock while they pack, and a third
    thread stores single packs meanwhile: every bundle is stored once, each chain has no
    gap, and nothing waits forever."""
    import time

    import rms_duck
    from rms_duck.duck import sqlstore, storage

    spans: list[tuple[float, float]] = []
    real = sqlstore._stored

    def timed(cur, candidates, columns):
        start = time.perf_counter()
        try:
            return real(cur, candidates, columns)
        finally:
            spans.append((start, time.perf_counter()))

    monkeypatch.setattr(sqlstore, "_stored", timed)
    groups = [[{"id": f"g{g}-n{i}", "score": (g * 7 + i) % 10 / 10,
                "content": f"group {g}: note {i} on the move to room {g % 13}"}
               for i in range(10)] for g in range(8_000)]
    table = pa.table({"q": list(range(8_000)), "c": pa.array(groups)})
    con = rms_duck.connect()
    con.execute("SET threads = 2")
    con.register("many", pa.Table.from_batches(table.to_batches(max_chunksize=2_000)))
    single = con.cursor()
    stop, stored_alone, failures = threading.Event(), [], []

    def store_alone() -> None:
        n = 0
        try:
            while not stop.is_set():
                result = rms_duck.pack(single, pa.Table.from_pylist(
                    [{"id": f"solo{n}", "score": 0.5, "content": f"solo note {n}"}]),
                    budget=200, namespace="solo")
                stored_alone.append(result.receipt_id)
                n += 1
        except Exception as exc:  # noqa: BLE001 - reported below
            failures.append(exc)

    thread = threading.Thread(target=store_alone)
    thread.start()
    try:
        receipts = con.execute(
            "SELECT q, rms_store(c, 200, namespace := 'bulk') FROM many").fetchall()
    finally:
        stop.set()
        thread.join(60)
    assert not thread.is_alive() and not failures
    spans.sort()
    assert any(later[0] < earlier[1] for earlier, later in itertools.pairwise(spans))  # at once
    assert [step for step, _ in store_across_processes].count("begin") >= 2
    assert len({receipt for _, receipt in receipts}) == 8_000
    chains = dict(con.execute(
        "SELECT chain_namespace, list(seq ORDER BY seq) FROM rms_receipts GROUP BY ALL"
    ).fetchall())
    assert chains["bulk"] == list(range(1, 8_001))
    assert chains["solo"] == list(range(1, len(stored_alone) + 1)) and stored_alone
    assert rms_duck.verify_receipts(con) == []
    assert not storage._APPEND_LOCK[0].locked()

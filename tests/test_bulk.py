"""Bulk token costing (in process and across processes), the line floor, the render memo,
and bulk packing in one statement: every path gives the exact counts and the same bundles."""

from __future__ import annotations

import re
import threading
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rms_duck.candidates import to_candidate
from rms_duck.duck import udfs
from rms_duck.duck.connection import connect
from rms_duck.formats import FORMATS, RecordView
from rms_duck.formats.base import clear_render_memos
from rms_duck.packing import batches
from rms_duck.records import Level
from rms_duck.tokens import bulk
from rms_duck.tokens.counter import LineCounter, clear_line_cache, word_runs
from tests.thorough import examples

from .conftest import held_on_another_thread, rows

TEXTS = ["hello world", "", "<|endoftext|> is text", "caf\u00e9 \u65e5\u672c\u8a9e \U0001f642",
         "tab\tand\nnewline", "  leading spaces", "x" * 3000]


def test_cost_texts_in_process_equals_encode_ordinary(enc):
    assert bulk.cost_texts(TEXTS, processes=1) == [len(enc.encode_ordinary(t)) for t in TEXTS]


def test_cost_lines_adds_the_newline(enc):
    assert bulk.cost_lines(["a line"], processes=1) == [len(enc.encode_ordinary("a line\n"))]


def test_small_batches_stay_in_process(monkeypatch):
    monkeypatch.setattr(bulk, "_cost_in_pool", pytest.fail)
    assert bulk.cost_texts(TEXTS * 3, processes=2) == bulk.cost_texts(TEXTS * 3, processes=1)


@pytest.mark.slow
def test_pool_gives_the_same_counts(enc):
    texts = [f"{t} {i}" for i in range(40) for t in TEXTS]
    expected = [len(enc.encode_ordinary(t)) for t in texts]
    assert bulk.cost_texts(texts, processes=2, threshold_chars=0) == expected
    assert bulk.cost_lines(texts, processes=2, threshold_chars=0) == [
        len(enc.encode_ordinary(t + "\n")) for t in texts]


def test_a_failing_pool_falls_back_to_this_process(monkeypatch, enc):
    def broken(*args):
        raise EOFError("a token-costing worker exited")

    monkeypatch.setattr(bulk, "_cost_in_pool", broken)
    texts = TEXTS * 4
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = bulk.cost_texts(texts, processes=2, threshold_chars=0)
    assert got == [len(enc.encode_ordinary(t)) for t in texts]
    assert "fell back to one process" in str(caught[0].message)


@given(st.lists(st.text(max_size=30), max_size=40), st.integers(1, 5))
def test_split_covers_every_text_once_in_order(texts, parts):
    bounds = bulk._split(texts, parts)
    assert len(bounds) == parts
    covered = [i for lo, hi in bounds for i in range(lo, hi)]
    assert covered == list(range(len(texts)))


def test_warm_counter_primes_and_records_fresh_lines():
    clear_line_cache()
    counter = LineCounter(record=True)
    lines = ["- \"first\"", "- \"second\"", "- \"first\""]
    assert bulk.warm_counter(counter, lines, processes=1) == 2
    assert counter.misses == 0
    assert counter.take_fresh() == {line: counter.line_cost(line) for line in lines}
    assert counter.misses == 0 and counter.take_fresh() == {}
    assert bulk.warm_counter(counter, lines, processes=1) == 0


_TEXT = st.text(st.characters(codec="utf-8"), max_size=120) | st.sampled_from(
    ["a\u2028b", "x\ty\nz", "!\u00a0!", "one  two\u3000three", "\u1680\u2000 ok", "\x1c\x1dq"])


@settings(max_examples=examples(300), deadline=None)
@given(text=_TEXT, name=st.sampled_from(sorted(FORMATS)))
def test_line_floor_never_exceeds_the_exact_line_cost(text, name):
    """The pruning floor is safe: a line it skips could never have fit."""
    counter = LineCounter()
    c = to_candidate({"id": "n1", "score": 0.5, "content": text})
    line = FORMATS[name].record_line(RecordView(c, Level.FULL, text, "m1", ()))
    assert counter.lower_bound(text) <= counter.line_cost(line)
    assert word_runs(text) <= counter.lower_bound(text)


_SPACED = st.text(st.sampled_from(list(" ab.\t\n\u3000\u00a0\u2028\x1c\u1680\x85")), max_size=14)


@settings(max_examples=examples(3000), deadline=None)
@given(text=_TEXT | _SPACED)
def test_word_runs_counts_the_runs_a_rendered_line_keeps_apart(text):
    """word_runs() (which counts spaces in printable text rather than splitting it) gives
    the runs of non-space characters once the escapes JSON writes are put in."""
    escaped = re.sub("[\t-\r\x1c-\x1f\x85\u2028\u2029]", "x", text)
    assert word_runs(text) == len(escaped.split())


def test_the_only_printable_white_space_is_the_space():
    """word_runs()' fast path rests on this: if a Unicode update made another white space
    printable, its runs would be counted wrong."""
    printable_spaces = [c for c in map(chr, range(0x110000)) if c.isprintable() and c.isspace()]
    assert printable_spaces == [" "]


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base", "o200k_harmony"])
def test_the_longest_token_is_read_off_the_ranks_as_off_the_token_list(encoding):
    """max_token_bytes() reads the ranks' keys, the floor's divisor: the same longest token
    as the tokenizer's own list of token bytes."""
    from rms_duck.tokens.counter import _MAX_TOKEN_BYTES, max_token_bytes
    from rms_duck.tokens.encodings import get_encoding

    enc = get_encoding(encoding)
    # The fast path reads this private attribute: if tiktoken renames it, say so here.
    assert isinstance(enc._mergeable_ranks, dict)
    _MAX_TOKEN_BYTES.pop(encoding, None)
    assert max_token_bytes(encoding) == max(map(len, enc.token_byte_values()))


@settings(max_examples=examples(100), deadline=None)
@given(text=_TEXT, name=st.sampled_from(sorted(FORMATS)), speaker=st.sampled_from([None, "Al"]))
def test_render_memo_returns_what_the_renderer_renders(text, name, speaker):
    fmt = FORMATS[name]
    c = to_candidate({"id": "n1", "score": 0.5, "content": text, "speaker": speaker})
    view = RecordView(c, Level.FULL, text, None, ())
    first = fmt.record_line(view)
    assert first == fmt.record_line(RecordView(c, Level.FULL, text, None, ()))
    assert first == type(fmt).record_line.__wrapped__(fmt, view)


def _bulk_rows(con, n_bundles: int, per_bundle: int):
    con.execute("CREATE OR REPLACE TEMP TABLE cands AS SELECT * FROM ("
                "SELECT i // ? AS q, i::VARCHAR AS id, (i % 97) / 97.0 AS score, "
                "'note ' || i || ' about the project and the deadline of ' || (i % 13) AS content "
                "FROM range(?) t(i))", [per_bundle, n_bundles * per_bundle])
    return con.execute(
        "SELECT q, b.context, b.tokens_used, b.receipt FROM (SELECT q, "
        "pack_context(list(c ORDER BY id), 160) AS b FROM cands c GROUP BY q) ORDER BY q"
    ).fetchall()


@pytest.mark.slow
def test_bulk_statement_with_batch_costing_gives_the_same_bundles(con, enc, monkeypatch):
    clear_line_cache()
    clear_render_memos()
    lazily = _bulk_rows(con, 300, 6)
    clear_line_cache()
    clear_render_memos()
    monkeypatch.setattr(batches, "BATCH_THRESHOLD_CHARS", 0)
    monkeypatch.setattr(batches, "default_processes", lambda: 2)
    monkeypatch.setattr(bulk, "DEFAULT_THRESHOLD_CHARS", 0)
    pooled = []
    real = bulk._cost_in_pool
    monkeypatch.setattr(bulk, "_cost_in_pool", lambda *a: pooled.append(1) or real(*a))
    in_bulk = _bulk_rows(con, 300, 6)
    assert pooled, "the batch was not costed in bulk across processes"
    assert in_bulk == lazily
    for _, context, used, _ in in_bulk:
        assert used == len(enc.encode_ordinary(context)) <= 160 - 100


def test_bulk_batch_costing_leaves_errors_to_the_pack_loop(con, monkeypatch):
    monkeypatch.setattr(batches, "BATCH_THRESHOLD_CHARS", 0)
    monkeypatch.setattr(batches, "default_processes", lambda: 2)
    bad = rows(3)
    bad[1]["score"] = 7.0
    with pytest.raises(Exception, match=r"candidate #1 .* field 'score' must be a number"):
        udfs.pack_udf(*[_chunked(v) for v in ([bad], [400], [None])])


def _chunked(values):
    import pyarrow as pa

    return pa.chunked_array([pa.array(values)])


def _groups(n_bundles: int, per_bundle: int, new_from: int | None = None):
    """n_bundles groups q of per_bundle notes; from group new_from on, notes of other text."""
    import pyarrow as pa

    def text(i: int) -> str:
        shift = 10_000 if new_from is not None and i // per_bundle >= new_from else 0
        return f"note {i + shift} about the project and the deadline of {i % 13}"

    return pa.Table.from_pylist([
        {"q": i // per_bundle, "id": f"n{i}", "score": (i % 97) / 97.0, "content": text(i)}
        for i in range(n_bundles * per_bundle)])


def test_a_slice_packed_before_skips_its_forecast_and_gives_the_same_bytes(monkeypatch, enc):
    """The forecast probe: once a slice's first bundles find every line cached, the rest of
    its forecast is skipped; the bundles are the same bytes as a cold pack's."""
    monkeypatch.setattr(batches, "BATCH_THRESHOLD_CHARS", 0)  # forecast every slice
    forecast = []
    real = batches.likely_lines
    monkeypatch.setattr(batches, "likely_lines", lambda *a: forecast.append(1) or real(*a))
    probe = batches.FORECAST_PROBE
    table = _groups(60, 5)
    clear_line_cache()
    clear_render_memos()
    # At 220 tokens all five notes of a bundle fit, so a pack costs every line the forecast
    # names (a line whose floor exceeds what is left is never costed, and stays unseen).
    cold = batches.pack_batches(table, by="q", budget=220, processes=2)
    assert len(forecast) == 1 + 60  # the probe stopped at the first unseen line
    forecast.clear()
    warm = batches.pack_batches(table, by="q", budget=220, processes=2)
    assert len(forecast) == probe  # only the probe: the rest of the forecast was skipped
    assert warm.equals(cold)
    # A slice whose first bundles are known but whose others are new: those are costed on
    # demand, and give the bytes a cold pack gives.
    mixed = _groups(60, 5, new_from=probe)
    clear_line_cache()
    clear_render_memos()
    expected = batches.pack_batches(mixed, by="q", budget=220, processes=1)
    clear_line_cache()
    clear_render_memos()
    batches.pack_batches(table.slice(0, probe * 5), by="q", budget=220, processes=1)
    forecast.clear()
    got = batches.pack_batches(mixed, by="q", budget=220, processes=2)
    assert len(forecast) == probe
    assert got.equals(expected)
    for context, used in zip(got.column("context").to_pylist(),
                             got.column("tokens_used").to_pylist(), strict=True):
        assert used == len(enc.encode_ordinary(context)) <= 220 - 100


def test_a_slice_that_opens_with_empty_lists_is_still_forecast(monkeypatch):
    """Empty lists (or budgets <= 0) prove nothing cached: the probe skipped the forecast
    of a slice whose first 16 lists were NULL (review of stop 24)."""
    import pyarrow as pa

    monkeypatch.setattr(batches, "BATCH_THRESHOLD_CHARS", 0)
    warmed = []
    real = batches.warm_counter
    monkeypatch.setattr(batches, "warm_counter",
                        lambda c, lines, **kw: warmed.append(len(lines)) or real(c, lines, **kw))
    rows = [[{"id": f"g{g}n{i}", "score": 0.5, "content": f"memory {g}-{i} of the plan"}
             for i in range(4)] for g in range(8)]
    lists = pa.array([None] * batches.FORECAST_PROBE + [[]] * 2 + rows)
    clear_line_cache()
    clear_render_memos()
    batches.pack_lists(lists, [300] * len(lists), [None] * len(lists), processes=2)
    assert sum(warmed) > 0


@pytest.mark.slow  # two GROUP BYs of 4,100 bundles
def test_duckdb_threads_take_turns_to_pack_and_get_the_same_bundles(monkeypatch):
    """A GROUP BY on two DuckDB threads packs one bundle at a time (the packer is Python:
    two at once only trade the GIL), with the same bytes as on one thread."""
    active, peak, lock = [0], [0], threading.Lock()
    real = batches.pack_candidates

    def watched(*args, **kwargs):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        try:
            return real(*args, **kwargs)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(batches, "pack_candidates", watched)
    sql = ("SELECT q, b.context, b.receipt FROM (SELECT q, pack_context(list({'id': id, "
           "'score': score, 'content': content}), 200) AS b FROM c GROUP BY q) ORDER BY q")
    out = []
    for threads in (2, 1):
        con = connect()
        con.execute(f"SET threads = {threads}")
        con.execute("CREATE TEMP TABLE c AS SELECT i // 2 AS q, i::VARCHAR AS id, "
                    "0.5 AS score, 'note ' || i AS content FROM range(8200) t(i)")
        out.append(con.execute(sql).fetchall())
        con.close()
    assert peak[0] == 1
    assert out[0] == out[1]


def test_a_child_forked_while_another_thread_packs_can_pack():
    """The packing lock is held by whichever thread packs; a fork taken meanwhile copied it
    locked, and every pack in the child then waited for ever (review of stop 24)."""
    import os
    import signal

    import pyarrow as pa

    with held_on_another_thread(batches._PACK_LOCK[0]):  # another thread, mid-pack
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a hung child dies of SIGALRM instead of hanging the test
            table = pa.Table.from_pylist([{"q": 1, "id": "a", "score": 0.5, "content": "hi"}])
            batches.pack_batches(table, by="q", budget=200, processes=1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status


def test_one_node_in_many_requests_costs_a_memo_lookup_per_line_not_per_request(monkeypatch):
    """A GROUP BY ranks the same node into many requests, each time with its own score and
    paths. Candidates hashed by id and text alone put every such variant in one bucket of
    the render memo, and each lookup compared its candidate with all of them field by field
    (2,000 bundles of the same 8 nodes: 30 s instead of 0.5 s). Now a lookup compares about
    once."""
    import pyarrow as pa

    from rms_duck.records import Candidate

    texts = [f"Maya moved meeting {i} to Thursday at the Lisbon office." for i in range(8)]
    groups = [[{"id": f"n{i}", "score": 0.5 + (g * 8 + i) / 1e6, "content": texts[i],
                "paths": ["LEXICAL", "VECTOR"][: 1 + (g + i) % 2]} for i in range(8)]
              for g in range(150)]
    compared = [0]
    generated_eq = Candidate.__eq__

    def counted(self, other):
        compared[0] += 1
        return generated_eq(self, other)

    clear_render_memos()
    monkeypatch.setattr(Candidate, "__eq__", counted)
    packed = batches.pack_lists(pa.array(groups), [512] * len(groups), [None] * len(groups),
                                processes=1)
    lines = sum(len(row["included"]) for row in packed.to_pylist())
    assert lines == 150 * 8
    assert compared[0] <= 2 * lines, compared[0]  # by id and text alone: 217,370


def _big_batch() -> list[str]:
    return [f"line {i} of a batch large enough to go to the workers" for i in range(400)]


def test_costing_while_another_thread_holds_the_workers_costs_here_without_waiting(enc):
    """A GROUP BY packing on the workers holds them for seconds; a costing batch on another
    connection waited for all of it. It now costs in its own process meanwhile."""
    texts = _big_batch()
    bulk.start_pool(2)
    out: list[list[int]] = []
    with held_on_another_thread(bulk.held_workers(1)):
        costing = threading.Thread(target=lambda: out.append(
            bulk.cost_texts(texts, processes=2, threshold_chars=0)))
        costing.start()
        costing.join(60)
        done_while_held = not costing.is_alive()
    costing.join()
    assert done_while_held
    assert out == [[len(enc.encode_ordinary(t)) for t in texts]]


def test_a_caller_that_may_not_wait_gets_none_while_bulk_costing_holds_the_pool():
    """held_workers(behind=...) waited for a bulk costing batch on another thread at its
    turn, though a caller that may not wait must get None at once (review of round 27)."""
    bulk.start_pool(2)
    with held_on_another_thread(bulk._POOL_LOCK):  # as _cost holds it
        with bulk.held_workers(1, behind=0) as workers:
            assert workers is None
    assert bulk._TURNS.ahead() == 0
    with bulk.held_workers(1, behind=0) as workers:
        assert workers is not None


def test_a_child_forked_while_another_thread_holds_the_workers_starts_its_own(enc):
    """The pool's lock was copied held into a forked child, whose every parallel batch then
    waited for ever; and the child held its parent's worker pipes open. The child now
    starts its own pool, and the inherited pipe ends point at /dev/null."""
    import os
    import signal

    bulk.start_pool(2)
    parents = [w.proc.pid for w in bulk._WORKERS]
    with held_on_another_thread(bulk.held_workers(1)):
        inherited = [w.stdin.fileno() for w in bulk._WORKERS]
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a hung child dies of SIGALRM instead of hanging the test
            code = 0
            try:
                if any(os.readlink(f"/proc/self/fd/{fd}") != os.devnull for fd in inherited):
                    code = 3
                with bulk.held_workers(1, behind=0) as workers:
                    if workers is None or workers[0].proc.pid in parents:
                        code = code or 4
                    texts = _big_batch()
                    if bulk.cost_texts(texts, processes=2, threshold_chars=0) != [
                            len(enc.encode_ordinary(t)) for t in texts]:
                        code = code or 5
                bulk.shutdown_pool()
            except BaseException:  # noqa: BLE001 - any failure is the child's exit code
                code = 6
            os._exit(code)
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    assert [w.proc.pid for w in bulk._WORKERS] == parents  # the parent's pool is untouched
    assert bulk.cost_texts(_big_batch(), processes=2, threshold_chars=0)


def test_a_dead_workers_pipes_are_closed_when_it_is_replaced():
    bulk.start_pool(2)
    [dead] = bulk._WORKERS
    dead.proc.kill()
    dead.proc.wait()
    bulk.start_pool(2)
    assert dead.stdin.closed and dead.stdout.closed
    assert bulk._WORKERS[0] is not dead


def test_a_worker_ignores_ctrl_c_its_parent_decides(enc):
    """Ctrl-C in a terminal reaches the worker too: it printed a KeyboardInterrupt traceback
    and died mid-batch. The parent now handles it (held_workers stops the pool)."""
    import os
    import signal
    import time

    bulk.start_pool(2)
    [worker] = bulk._WORKERS
    os.kill(worker.proc.pid, signal.SIGINT)
    time.sleep(0.2)  # the signal is delivered; an interrupted worker would be gone by now
    assert worker.alive()
    texts = _big_batch()
    assert bulk.cost_texts(texts, processes=2, threshold_chars=0) == [
        len(enc.encode_ordinary(t)) for t in texts]
    assert bulk._WORKERS == [worker]


_CTRL_C_AT_START = """
import os, signal, sys
from rms_duck.tokens import bulk

signal.signal(signal.SIGINT, lambda *_: None)  # this process handles Ctrl-C its own way
worker = bulk._Worker()
os.killpg(0, signal.SIGINT)  # Ctrl-C in a terminal: the whole group, the worker starting
texts = [f"line {i} of a batch large enough to go to the workers" for i in range(400)]
worker.send(("cl100k_base", "", bulk.registrations(), texts))
print(worker.alive() and len(worker.receive()) == len(texts))
worker.close()
"""


def test_a_worker_ignores_ctrl_c_that_comes_while_it_starts():
    """A worker set itself to ignore SIGINT only once it had imported rms_duck: a Ctrl-C in
    its first tens of milliseconds (a first large batch, started and interrupted at once)
    killed it, often printing a KeyboardInterrupt traceback. It now starts with SIGINT
    blocked. Run in a session of its own, whose whole group the SIGINT is sent to."""
    import subprocess
    import sys

    run = subprocess.run([sys.executable, "-c", _CTRL_C_AT_START], capture_output=True,
                         text=True, timeout=120, start_new_session=True)
    assert (run.returncode, run.stdout.strip(), run.stderr) == (0, "True", "")


def test_a_worker_closed_just_before_a_fork_is_orphaned_without_error():
    """_workers() and shutdown_pool() close a worker before it leaves the pool; a child
    forked in between found a closed pipe, and _forked() failed before it had pointed the
    other workers' pipes at /dev/null (review of this stop's diff)."""
    bulk.start_pool(2)
    [worker] = bulk._WORKERS
    worker.close()
    worker.orphan()  # in a child, at fork: nothing left to point anywhere
    bulk.shutdown_pool()
    assert bulk._WORKERS == []


def test_a_worker_never_imports_from_the_current_directory(tmp_path, monkeypatch, enc):
    """Workers ran `python -m`, which puts the current directory first on their path: a
    struct.py lying there (a shared folder, a cloned repository) ran in every worker."""
    marker = tmp_path / "ran"
    (tmp_path / "struct.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "import sys\n"
        "del sys.modules['struct']\n"
        "sys.path = [p for p in sys.path if p not in ('', '.', " f"{str(tmp_path)!r})]\n"
        "from struct import *  # noqa\n"
        "from struct import calcsize, pack, unpack  # noqa\n", encoding="utf-8")
    bulk.shutdown_pool()
    monkeypatch.chdir(tmp_path)
    try:
        assert bulk.start_pool(2) == 1
        texts = ["hello world " * 20_000, "more text " * 20_000, "x y z " * 20_000, "w"]
        assert bulk.cost_texts(texts, processes=2) == [len(enc.encode_ordinary(t))
                                                       for t in texts]
    finally:
        bulk.shutdown_pool()
    assert not marker.exists()

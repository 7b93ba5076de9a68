"""The cyclic garbage collector is paused while a pack runs, and only then (gcpause.py)."""

from __future__ import annotations

import gc
import threading

import pytest

from rms_duck.bench.workload import make_rows
from rms_duck.errors import CandidateError
from rms_duck.packing import pipeline
from rms_duck.packing.pipeline import pack_candidates

CONFIGS = [None, {"context_format": "auditable"}, {"context_format": "compact"},
           {"session_context_packing": "adjacent"}, {"multipath_ordering": "density"},
           {"representation_policy": "budget_fraction", "context_format": "auditable"}]


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_a_pack_runs_with_the_collector_off_and_turns_it_back_on(collector_on, monkeypatch):
    seen = []
    real = pipeline.dedupe

    def spy(rows):
        seen.append(gc.isenabled())
        return real(rows)

    monkeypatch.setattr(pipeline, "dedupe", spy)
    pack_candidates(make_rows(50), budget=1_000)
    assert seen == [False]
    assert gc.isenabled()


def test_a_failed_pack_turns_the_collector_back_on(collector_on):
    with pytest.raises(CandidateError):
        pack_candidates([{"id": "a", "score": 2.0, "content": "x"}], budget=100)
    assert gc.isenabled()


def test_a_collector_the_caller_turned_off_stays_off():
    was = gc.isenabled()
    gc.disable()
    try:
        pack_candidates(make_rows(20), budget=500)
        assert not gc.isenabled()
    finally:
        if was:
            gc.enable()


def test_concurrent_packs_share_one_pause(collector_on):
    rows = make_rows(400)
    start = threading.Barrier(4)
    errors = []

    def work():
        try:
            start.wait()
            for _ in range(5):
                pack_candidates(rows, budget=2_000)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert gc.isenabled()


_CYCLES = """if True:
    import gc, json, sys
    from rms_duck.bench.workload import make_rows
    from rms_duck.packing.pipeline import pack_candidates
    config = json.loads(sys.argv[1])
    rows = make_rows(600)
    for i, row in enumerate(rows[:40]):  # pins, tasks, conflicts, prose, sessions too
        row.update({"pinned": i % 7 == 0, "prose": f"summary {i}" if i % 3 == 0 else None,
                    "contradicts": [rows[i + 1]["id"]] if i % 5 == 0 else [],
                    "session_id": "s1", "session_position": i})
    pack_candidates(rows, budget=4_096, config=config)  # warm whatever caches it fills
    gc.collect()
    gc.disable()
    bundle = pack_candidates(rows, budget=4_096, config=config)
    assert bundle.receipt and bundle.decisions
    del bundle
    print(gc.collect())
"""


@pytest.mark.slow
@pytest.mark.parametrize("config", CONFIGS)
def test_a_pack_leaves_no_reference_cycles(config):
    """What makes the pause safe: nothing a pack allocates needs the collector to be freed.
    In a process of its own: threads other tests leave running (Dask's) make cyclic
    garbage of their own while the pack runs."""
    import json
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _CYCLES, json.dumps(config)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0"]


def test_packs_that_keep_overlapping_still_collect_young_cycles(collector_on, monkeypatch):
    """Review finding: with packs always overlapping (a thread pool), the last one never
    ended, so cyclic garbage made by other code piled up with the collector off."""
    import weakref

    from rms_duck.packing import gcpause

    monkeypatch.setattr(gcpause, "YOUNG_LIMIT", 1_000)
    inside, release = threading.Event(), threading.Event()

    def long_pack():
        with gcpause.gc_paused():
            inside.set()
            release.wait(30)

    thread = threading.Thread(target=long_pack)
    thread.start()
    assert inside.wait(30)
    try:
        class Node:
            pass

        node = Node()
        node.me = node
        ref = weakref.ref(node)
        del node
        for _ in range(2_000):  # young garbage past the limit
            pile: list = []
            pile.append(pile)
        assert not gc.isenabled() and ref() is not None
        pack_candidates(make_rows(50), budget=1_000)  # ends while the other still runs
        assert ref() is None
        assert not gc.isenabled()
    finally:
        release.set()
        thread.join()
    assert gc.isenabled()


def test_a_bulk_slice_leaves_only_its_arrow_chunk_to_scan(collector_on, monkeypatch):
    """pack_lists() drops each slice's Candidates and bundles inside the pause: left alive
    at its end, they were thousands of young objects the next collection had to scan
    (3 to 5% of a warm GROUP BY)."""
    import pyarrow as pa

    from rms_duck.packing import gcpause
    from rms_duck.packing.batches import pack_lists

    groups = [make_rows(8, seed=seed) for seed in range(300)]
    column = pa.array(groups)
    pack_lists(column, [512] * len(groups), [None] * len(groups), processes=1)  # warm
    young: list[int] = []
    real = gcpause._leave

    def leave():
        if gcpause._state["active"] == 1:  # the slice's pause, not a pack's nested in it
            young.append(len(gc.get_objects(generation=0)))
        real()

    monkeypatch.setattr(gcpause, "_leave", leave)
    gc.collect()
    out = pack_lists(column, [512] * len(groups), [None] * len(groups), processes=1)
    assert len(out) == len(groups) and young
    # 2,400 candidates and 300 bundles were packed: a few dozen objects of the call remain.
    assert max(young) < 200, young


def test_a_bundle_keeps_no_candidate_alive_and_its_trace_is_not_scanned():
    """A bundle's trace rows hold plain values (bundle.TraceRow), so the candidates a pack
    built from the caller's dict rows die with the pack, and after one collection the rows
    are no longer tracked: the young collection after a large pack scanned every candidate
    and row before (8% of a warm pack of 10,000 dict rows)."""
    rows = make_rows(400, seed=3)
    bundle = pack_candidates(rows + [dict(rows[0], score=0.01)], budget=1_000,
                             config={"min_score": 0.02})
    plain = (str, float, int, bool, type(None))
    for row in bundle.trace:
        assert all(type(v) in plain or (type(v) is tuple and all(type(x) is str for x in v))
                   for v in row), row
    gc.collect()
    assert not any(gc.is_tracked(row) for row in bundle.trace)
    referents = gc.get_referents(*bundle.trace)
    assert not any(type(r).__name__ == "Candidate" for r in referents)
    assert {row[11] for row in bundle.trace} >= {None, "BUDGET_EXHAUSTED", "DUPLICATE"}

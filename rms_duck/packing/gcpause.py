"""Pause CPython's cyclic garbage collector while a pack runs.

A pack of N candidates allocates a few container objects per candidate (outcomes, trace
rows, excluded records) that all live until it ends, so the collector promotes them and,
in a process with a large heap, rescans the whole heap several times per pack: about 40%
of a warm 10,000-candidate pack in `rms-duck bench`. A pack makes no reference cycles
(tests/test_gcpause.py checks it), so collecting after it loses nothing.

Nested and concurrent packs share one pause: the collector is turned back on when the last
of them ends, and only if it was on when the first began. Packs that keep overlapping (a
thread pool, DuckDB's UDF threads) could otherwise keep it off for good while other code
makes cyclic garbage, so a pack that ends while others still run collects the young
generations once they hold YOUNG_LIMIT objects: the heap's old objects are not rescanned.
A thread that calls gc.disable() while a pack runs finds the collector on again when the
packs end.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_LIMIT = 50_000
_LOCK = threading.Lock()
_state = {"active": 0, "was_enabled": False}


@contextmanager
def gc_paused() -> Iterator[None]:
    entered = False
    try:
        with _LOCK:
            _state["active"] += 1
            entered = True
            if _state["active"] == 1:
                _state["was_enabled"] = gc.isenabled()
                gc.disable()
        yield
    finally:
        if entered:
            _leave()


def _leave() -> None:
    with _LOCK:
        _state["active"] -= 1
        if not _state["was_enabled"]:
            return
        if _state["active"] == 0:
            gc.enable()
            return
        if gc.get_count()[0] < YOUNG_LIMIT:  # tracked objects made since the last collection
            return
    gc.collect(1)  # outside the lock: other packs may enter and leave meanwhile

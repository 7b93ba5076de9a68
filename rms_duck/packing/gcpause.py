"""Pause CPython's cyclic garbage collector while a pack runs.

A pack of N candidates allocates a few container objects per candidate (outcomes, trace
rows, excluded records) that all live until it ends, so the collector promotes them and,
in a process with a large heap, rescans the whole heap several times per pack: about 40%
of a warm 10,000-candidate pack in `rms-duck bench`. A pack makes no reference cycles
(tests/test_gcpause.py checks it), so collecting after it loses nothing.

Nested and concurrent packs share one pause: the collector is turned back on when the last
of them ends, and only if it was on when the first began. A thread that calls gc.disable()
while a pack runs finds the collector on again when the packs end.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()
_state = {"active": 0, "was_enabled": False}


@contextmanager
def gc_paused() -> Iterator[None]:
    with _LOCK:
        if _state["active"] == 0:
            _state["was_enabled"] = gc.isenabled()
            gc.disable()
        _state["active"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _state["active"] -= 1
            if _state["active"] == 0 and _state["was_enabled"]:
                gc.enable()

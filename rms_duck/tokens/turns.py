"""Turns at the costing workers, first come, first served.

A plain lock is not fair: a multi-threaded GROUP BY's threads took it back again and
again while another call waited (a 400-group call waited 3.8 s). Here each caller joins a
queue and gets its turn when every caller before it is done, so a call knows how many are
ahead of it before it decides to wait.
"""

from __future__ import annotations

import threading
from collections import deque


class Turns:
    """A first-come, first-served queue for one resource."""

    def __init__(self) -> None:
        # Entered as the lock itself (a C context manager), not through the Condition's
        # Python __enter__: Ctrl-C between the two would leave the queue locked for good.
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._queue: deque[object] = deque()  # the caller whose turn it is first

    def ahead(self) -> int:
        """Callers holding or waiting for a turn now."""
        with self._lock:
            return len(self._queue)

    def take(self, behind: int | None = None) -> object | None:
        """Wait for a turn and return its token; or, when more than `behind` callers are
        ahead (None: any number may be), return None at once."""
        token = object()
        with self._lock:
            if behind is not None and len(self._queue) > behind:
                return None
            self._queue.append(token)
            try:
                while self._queue[0] is not token:
                    self._changed.wait()
            except BaseException:
                # Ctrl-C while waiting: leave the queue, or every later caller waits for ever.
                self._queue.remove(token)
                self._changed.notify_all()
                raise
        return token

    def done(self, token: object) -> None:
        """End the turn `token` holds: the next caller in the queue gets its turn."""
        with self._lock:
            if self._queue and self._queue[0] is token:
                self._queue.popleft()
                self._changed.notify_all()

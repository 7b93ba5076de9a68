"""Entry point of a token-costing worker process: `python -m rms_duck.tokens.worker` (bulk.py)."""

from __future__ import annotations

import signal
import sys

from rms_duck.tokens.bulk import serve

if __name__ == "__main__":
    # Ctrl-C in a terminal reaches the whole process group: the parent decides (it stops
    # the pool), and the worker exits at end of input without a traceback of its own.
    # It starts with SIGINT blocked (bulk.py); one that came meanwhile is dropped here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    replies = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the reply stream
    serve(sys.stdin.buffer, replies)

"""Entry point of a token-costing worker process: `python -m rms_duck.tokens.worker` (bulk.py)."""

from __future__ import annotations

import sys

from rms_duck.tokens.bulk import serve

if __name__ == "__main__":
    replies = sys.stdout.buffer
    sys.stdout = sys.stderr  # a stray print must not corrupt the reply stream
    serve(sys.stdin.buffer, replies)

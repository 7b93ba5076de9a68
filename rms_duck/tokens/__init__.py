"""Token costing (RFC section 3): offline encodings, exact per-line counts, estimates, bulk costing.

Modules: encodings (local, hash-verified BPE ranks), counter (Method 1, exact, per-line
cache), estimate (Method 2, characters per token), bulk (many lines at once, in worker
processes), worker (the worker process entry point). Imports tiktoken only.
"""

from __future__ import annotations

from .counter import LineCounter as LineCounter
from .counter import count_tokens as count_tokens
from .encodings import get_encoding as get_encoding
from .encodings import register_bpe_file as register_bpe_file

__all__ = ["LineCounter", "count_tokens", "get_encoding", "register_bpe_file"]

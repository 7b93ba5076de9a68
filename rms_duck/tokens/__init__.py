"""Token costing (RFC section 3): offline encodings, exact per-line counts, estimates, bulk costing.

Modules: encodings (every encoding, loaded offline and hash-verified), openai_specs
(tiktoken's definitions, read without a download), rankfiles (where local rank files are
found), hf (the Hugging Face tokenizer.json backend), models (model name -> encoding),
counter (Method 1, exact, per-line cache), estimate (Method 2, characters per token), bulk
(many lines at once, in worker processes), worker (the worker process entry point).
Imports tiktoken, and `tokenizers` only for a registered tokenizer.json.
"""

from __future__ import annotations

from typing import Any

from .counter import LineCounter as LineCounter
from .counter import count_tokens as count_tokens
from .encodings import get_encoding as get_encoding
from .encodings import register_bpe_file as register_bpe_file
from .encodings import register_tokenizer_file as register_tokenizer_file

__all__ = ["LineCounter", "count_tokens", "get_encoding", "register_bpe_file",
           "register_tokenizer_file"]


def __getattr__(name: str) -> Any:
    """Submodules load on first use (rms_duck._submodule)."""
    import rms_duck

    return rms_duck._submodule(__name__, name)

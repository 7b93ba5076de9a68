"""Evidence-retention evaluation: SQL ranking plus packing over labelled conversations."""

from __future__ import annotations

from typing import Any

from .loader import Conversation as Conversation
from .loader import load_conversations as load_conversations
from .runner import EvalRun as EvalRun
from .runner import run_eval as run_eval

__all__ = ["Conversation", "EvalRun", "load_conversations", "run_eval"]


def __getattr__(name: str) -> Any:
    """Submodules load on first use (rms_duck._submodule)."""
    import rms_duck

    return rms_duck._submodule(__name__, name)

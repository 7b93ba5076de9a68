"""Benchmarks: packing speed (perf) and the RFC-0006 section 10 requirements (rfc)."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    """Submodules load on first use (rms_duck._submodule)."""
    import rms_duck

    return rms_duck._submodule(__name__, name)

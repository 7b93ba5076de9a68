"""Packing (RFC sections 4-7): candidates in, a rendered, exactly counted bundle out. Pure.

The pipeline, in order: prepare (dedupe, conflict map), selector (tiers, representations,
the section 7 ladder), neighbours (session context), folding, layout (the running exact
tally), assemble (header, metadata line, guidance, one whole-output count), pipeline (the
orchestration). forecast predicts the lines a pack will cost; repack re-packs a receipt.
No module here imports duckdb, sqlglot or pyarrow.
"""

from __future__ import annotations

from typing import Any

from .pipeline import pack_candidates as pack_candidates

__all__ = ["pack_candidates"]


def __getattr__(name: str) -> Any:
    """Submodules load on first use (rms_duck._submodule)."""
    import rms_duck

    return rms_duck._submodule(__name__, name)

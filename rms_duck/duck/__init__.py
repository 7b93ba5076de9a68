"""The DuckDB adapter: connections, UDFs, macros and storage (the only duckdb importer)."""

from __future__ import annotations

from typing import Any

from .connection import connect as connect
from .connection import cursor as cursor
from .connection import register as register

__all__ = ["connect", "cursor", "register"]


def __getattr__(name: str) -> Any:
    """Submodules load on first use (rms_duck._submodule)."""
    import rms_duck

    return rms_duck._submodule(__name__, name)

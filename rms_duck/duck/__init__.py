"""The DuckDB adapter: connections, UDFs, macros and storage (the only duckdb importer)."""

from __future__ import annotations

from .connection import connect as connect
from .connection import cursor as cursor
from .connection import register as register

__all__ = ["connect", "cursor", "register"]

"""dbt-duckdb plugin: `plugins: [{module: rms_duck.dbt}]` in a profile registers rms_duck on
dbt's connection, so models can call pack_context(), rms_store() and the ranking macros.

configure_connection runs once per connection (schema, persistent macros, UDFs);
configure_cursor runs on each cursor dbt copies from it, which needs its own session time
zone and the TEMP macros over the UDFs (a cursor does not see its parent's TEMP objects).
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin

from .duck.connection import register
from .duck.cursors import install_macros, utc


class Plugin(BasePlugin):
    def configure_connection(self, conn: Any) -> None:
        register(conn)

    def configure_cursor(self, cursor: Any) -> None:
        utc(cursor)
        install_macros(cursor)

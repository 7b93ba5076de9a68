"""dbt-duckdb plugin: `plugins: [{module: rms_duck.dbt}]` in a profile registers rms_duck on
dbt's connection, so models can call pack_context(), rms_store() and the ranking macros.

configure_connection runs once per connection (schema, persistent macros, UDFs);
configure_cursor runs on each cursor dbt copies from it, which needs its own session time
zone and the TEMP macros over the UDFs (a cursor does not see its parent's TEMP objects).

The plugin's `config` may list Hugging Face tokenizer files for models to count with
(config := {'encoding': NAME}), as `rms-duck ... --tokenizer-file` does:
`config: {tokenizer_files: [{name: NAME, path: PATH, sha256: SHA256}]}`.
"""

from __future__ import annotations

from typing import Any

from dbt.adapters.duckdb.plugins import BasePlugin

from .duck.connection import register
from .duck.cursors import install_macros, utc
from .errors import ConfigError


class Plugin(BasePlugin):
    def initialize(self, plugin_config: dict[str, Any]) -> None:
        from .tokens.encodings import register_tokenizer_file

        entries = plugin_config.get("tokenizer_files") or []
        if not isinstance(entries, list):
            raise ConfigError(f"the rms_duck.dbt plugin's tokenizer_files must be a list of "
                              f"{{name, path, sha256}} entries, got {entries!r}")
        for entry in entries:
            missing = [k for k in ("name", "path", "sha256")
                       if not isinstance(entry, dict) or k not in entry]
            if missing:
                raise ConfigError(
                    f"the rms_duck.dbt plugin's tokenizer_files entry {entry!r} lacks "
                    f"{', '.join(missing)}; give each as {{name: NAME, path: PATH, sha256: "
                    "SHA256}")
            register_tokenizer_file(entry["name"], entry["path"], sha256=entry["sha256"])

    def configure_connection(self, conn: Any) -> None:
        register(conn)

    def configure_cursor(self, cursor: Any) -> None:
        utc(cursor)
        install_macros(cursor)

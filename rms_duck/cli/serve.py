"""`rms-duck serve --db PATH`: the MCP server over stdio (needs the `mcp` extra)."""

from __future__ import annotations

import argparse

from .format_modules import add_format_module_argument, import_format_modules
from .tokenizer_options import add_tokenizer_file_argument, register_tokenizer_files


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True,
                        help="DuckDB file of memory nodes and receipts (created when new)")
    parser.add_argument("--read-only", action="store_true",
                        help="open the file read-only: pack without storing, and audit")
    # Agents may name it in config.encoding, and replay and verify need the tokenizer a
    # stored receipt was counted with; the error for an unknown encoding points here.
    add_tokenizer_file_argument(parser)
    # Likewise a custom context format: packs name it, replays need it registered.
    add_format_module_argument(parser)


def run(args: argparse.Namespace) -> int:
    from ..mcpserver import serve

    register_tokenizer_files(args)
    import_format_modules(args)
    serve(args.db, read_only=args.read_only)
    return 0

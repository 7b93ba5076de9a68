"""`rms-duck serve --db PATH`: the MCP server over stdio (needs the `mcp` extra)."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True,
                        help="DuckDB file of memory nodes and receipts (created when new)")
    parser.add_argument("--read-only", action="store_true",
                        help="open the file read-only: pack without storing, and audit")


def run(args: argparse.Namespace) -> int:
    from ..mcpserver import serve

    serve(args.db, read_only=args.read_only)
    return 0

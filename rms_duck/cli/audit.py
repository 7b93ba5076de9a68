"""`rms-duck audit --db PATH`: summarise and verify a database; exit 1 when it fails."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import duckdb

from ..audit.summary import format_summary, summarise
from ..duck.connection import connect
from .tokenizer_options import add_tokenizer_file_argument, register_tokenizer_files


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True, help="DuckDB file written by rms_duck")
    parser.add_argument("--replay", action="store_true",
                        help="also re-pack every receipt and compare the bytes")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_tokenizer_file_argument(parser)  # --replay of packs counted with a tokenizer.json


def run(args: argparse.Namespace) -> int:
    """Print the report; 0 when verification (and replay) pass, 1 when not, 2 on no file."""
    path = Path(args.db)
    if not path.is_file():
        print(f"Error: --db {args.db!r} is not a file; pass a database written by "
              "`rms-duck demo --db PATH` or rms_duck.pack(...)", file=sys.stderr)
        return 2
    register_tokenizer_files(args)
    try:
        con = connect(str(path))
    except duckdb.Error as exc:
        print(f"Error: cannot open --db {args.db!r}: {str(exc).splitlines()[0]}; pass a DuckDB "
              "file that no other process has open for writing", file=sys.stderr)
        return 2
    try:
        summary = summarise(con, with_replay=args.replay)
    finally:
        con.close()
    if args.json:
        print(json.dumps(summary.to_dict(), indent=2, default=str))
    else:
        print(format_summary(summary, database=str(path)))
    return 0 if summary.ok else 1

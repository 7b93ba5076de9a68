"""`rms-duck audit --db PATH`: summarise and verify a database; exit 1 when it fails.

The file is opened read-only and nothing is created or changed in it; every check runs SQL
and code shipped in the package, never views or macros stored in the audited database.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import duckdb

from ..audit.heads import read_heads, write_heads
from ..audit.summary import format_summary, summarise
from ..duck.cursors import utc
from .format_modules import add_format_module_argument, import_format_modules
from .tokenizer_options import add_tokenizer_file_argument, register_tokenizer_files


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", required=True, help="DuckDB file written by rms_duck")
    parser.add_argument("--replay", action="store_true",
                        help="also re-pack every receipt and compare bytes, decisions, encoding")
    parser.add_argument("--line-costs", action="store_true",
                        help="also recount every rms_line_costs row whose line can be rebuilt")
    parser.add_argument("--heads", metavar="FILE",
                        help="check each chain still reaches the heads saved in FILE")
    parser.add_argument("--export-heads", metavar="FILE",
                        help="when verification passes, save each chain's head to FILE "
                             "(keep it where the database's writers cannot reach)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_tokenizer_file_argument(parser)  # --replay of packs counted with a tokenizer.json
    add_format_module_argument(parser)  # --replay of packs made with a custom format


def run(args: argparse.Namespace) -> int:
    """Print the report; 0 when every check passes, 1 when one fails, 2 on no usable file."""
    path = Path(args.db)
    if not path.is_file():
        print(f"Error: --db {args.db!r} is not a file; pass a database written by "
              "`rms-duck demo --db PATH` or rms_duck.pack(...)", file=sys.stderr)
        return 2
    register_tokenizer_files(args)
    import_format_modules(args)
    heads = read_heads(args.heads) if args.heads else None
    try:
        con = utc(duckdb.connect(str(path), read_only=True))
    except duckdb.Error as exc:
        print(f"Error: cannot open --db {args.db!r}: {str(exc).splitlines()[0]}; pass a DuckDB "
              "file that no other process has open for writing", file=sys.stderr)
        return 2
    try:
        summary = summarise(con, with_replay=args.replay, heads=heads,
                            with_line_costs=args.line_costs)
        exported = None
        if args.export_heads and summary.ok:
            exported = write_heads(con, args.export_heads, verify_first=False)  # just verified
    finally:
        con.close()
    if args.json:
        out = summary.to_dict()
        out["exported_heads"] = exported
        print(json.dumps(out, indent=2, default=str))
    else:
        print(format_summary(summary, database=str(path)))
        if heads is not None:
            missed = sum(p.problem.startswith("HEAD_") for p in summary.problems)
            print(f"heads       OK: every chain still reaches the {len(heads['chains'])} "
                  f"head(s) saved in {args.heads}" if not missed else
                  f"heads       FAILED: {missed} of {len(heads['chains'])} saved head(s) in "
                  f"{args.heads} not reached (see verify above)")
        if args.export_heads:
            print(f"heads       saved {len(exported['chains'])} chain head(s) to "
                  f"{args.export_heads}" if exported is not None else
                  f"heads       NOT saved to {args.export_heads}: the database does not verify")
    return 0 if summary.ok else 1

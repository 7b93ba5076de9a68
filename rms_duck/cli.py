"""`rms-duck`: demo, bench, eval and audit commands. Thin: each calls one library function."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from .errors import RmsError


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rms-duck", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    demo = commands.add_parser("demo", help="pack the sample agent memory into a DuckDB file")
    demo.add_argument("--db", default="rms.duckdb", help="DuckDB file (default: rms.duckdb)")
    demo.add_argument("--budget", type=int, default=4096)
    demo.add_argument("--format", default="reader", choices=("reader", "auditable", "compact"))

    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            from .demo import run_demo

            run_demo(args.db, budget=args.budget, context_format=args.format, out=sys.stdout)
        return 0
    except RmsError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())

"""`rms-duck`: demo, bench, eval and audit commands. Thin: each calls one library function."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from ..errors import RmsError

# command -> (module with add_arguments(parser) and run(args) -> int, help text)
COMMANDS = {
    "demo": ("rms_duck.cli.demo", "pack the sample agent memory into a DuckDB file"),
    "bench": ("rms_duck.cli.bench", "measure packing speed (or the RFC section 10 benchmarks)"),
    "eval": ("rms_duck.cli.eval", "evidence retention of SQL ranking + packing on JSONL"),
    "audit": ("rms_duck.cli.audit", "summarise and verify the bundles and receipts in a database"),
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="rms-duck", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    modules = {}
    for name, (module_name, help_text) in COMMANDS.items():
        sub = commands.add_parser(name, help=help_text)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module_name.startswith(exc.name):
                raise
            continue  # a command whose module is not part of this build
        module.add_arguments(sub)
        modules[name] = module
    args = parser.parse_args(argv)
    if args.command not in modules:
        parser.error(f"command {args.command!r} is not available in this build")
    try:
        return int(modules[args.command].run(args) or 0)
    except RmsError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())

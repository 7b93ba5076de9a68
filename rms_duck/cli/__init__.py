"""`rms-duck`: demo, pack, serve, bench, eval and audit. Thin: each calls one library function."""

from __future__ import annotations

import argparse
import difflib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..errors import RmsError

# command -> (module with add_arguments(parser) and run(args) -> int, help text)
COMMANDS = {
    "demo": ("rms_duck.cli.demo", "pack the sample agent memory into a DuckDB file"),
    "pack": ("rms_duck.cli.pack", "pack candidates read as JSON lines on stdin; print the bundle"),
    "serve": ("rms_duck.cli.serve", "an MCP server over stdio: pack, explain, verify, replay"),
    "bench": ("rms_duck.cli.bench", "measure packing speed (or the RFC section 10 benchmarks)"),
    "eval": ("rms_duck.cli.eval", "evidence retention of SQL ranking + packing on JSONL"),
    "audit": ("rms_duck.cli.audit", "summarise and verify the bundles and receipts in a database"),
}


def main(argv: Sequence[str] | None = None) -> int:
    from .. import __version__

    parser = argparse.ArgumentParser(prog="rms-duck", description=__doc__)
    parser.add_argument("--version", action="version", version=f"rms-duck {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    modules, subs = {}, {}
    for name, (module_name, help_text) in COMMANDS.items():
        sub = subs[name] = commands.add_parser(name, help=help_text)
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not module_name.startswith(exc.name):
                raise
            continue  # a command whose module is not part of this build
        module.add_arguments(sub)
        modules[name] = module
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        subs[args.command].error(_unrecognized(unknown, subs[args.command]))
    if args.command not in modules:
        parser.error(f"command {args.command!r} is not available in this build")
    try:
        code = int(modules[args.command].run(args) or 0)
        sys.stdout.flush()  # here, not at exit, so a closed pipe is caught below
        return code
    except RmsError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return _closed_pipe()


def _unrecognized(unknown: list[str], parser: argparse.ArgumentParser) -> str:
    """argparse's "unrecognized arguments: --confg x", with the option meant when one is
    close (`--confg` -> `--config`): Python 3.11's argparse suggests none."""
    options = [o for action in parser._actions for o in action.option_strings]
    hints = [f"{given.partition('=')[0]}: did you mean {close[0]}?" for given in unknown
             if given.startswith("--") and (close := difflib.get_close_matches(
                 given.partition("=")[0], options, n=1, cutoff=0.75))]
    return f"unrecognized arguments: {' '.join(unknown)}" + "".join(f"; {h}" for h in hints)


def _closed_pipe() -> int:
    """The reader went away (`rms-duck ... | head -1`): stop quietly, as `yes | head` does.
    Pointing stdout at /dev/null stops the interpreter's final flush from failing again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141  # 128 + SIGPIPE, what a shell reports for a writer cut off by a closed pipe


if __name__ == "__main__":
    raise SystemExit(main())


def __getattr__(name: str) -> Any:
    """Submodules load on first use (rms_duck._submodule)."""
    import rms_duck

    return rms_duck._submodule(__name__, name)

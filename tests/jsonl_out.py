"""The command-line end the evaluation-data generators share: write JSONL to --out or stdout."""

from __future__ import annotations

import argparse
import sys


def parser(doc: str) -> argparse.ArgumentParser:
    """A parser with the generators' common --out option; the first docstring line is help."""
    made = argparse.ArgumentParser(description=doc.splitlines()[0])
    made.add_argument("--out", help="write here instead of standard output")
    return made


def emit(text: str, out: str | None) -> int:
    """Write `text` to `out` with Unix newlines whatever the platform, or to stdout."""
    if out:
        with open(out, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    else:
        sys.stdout.write(text)
    return 0

"""argparse types for counts, lists of counts and output paths: a bad value is a usage
error naming the option and the fix, before any work starts, never a traceback after it."""

from __future__ import annotations

import argparse
import os


def positive_int(text: str) -> int:
    """A whole number >= 1 (underscores allowed: 10_000)."""
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {value}")
    return value


def positive_ints(text: str) -> tuple[int, ...]:
    """A comma-separated list of whole numbers >= 1."""
    return tuple(positive_int(part.strip()) for part in text.split(","))


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def output_path(text: str) -> str:
    """A file path whose folder exists and may be written, checked before the run."""
    folder = os.path.dirname(os.path.abspath(text))
    if not os.path.isdir(folder):
        raise argparse.ArgumentTypeError(f"folder {folder!r} of {text!r} does not exist; "
                                         "create it or write elsewhere")
    if os.path.isdir(text) or not os.access(folder, os.W_OK):
        raise argparse.ArgumentTypeError(f"{text!r} cannot be written; pass a file path in a "
                                         "folder you may write to")
    return text

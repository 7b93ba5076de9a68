"""--encoding and --model, shared by the commands that pack."""

from __future__ import annotations

import argparse
from typing import Any


def add_tokenizer_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--encoding", default=None,
                        help="encoding to count with (default o200k_base; also cl100k_base, or "
                             "a registered tokenizer)")
    parser.add_argument("--model", default=None,
                        help="model whose encoding to count with, as tiktoken maps it "
                             "(e.g. gpt-4o, gpt-4); give --model or --encoding, not both")


def tokenizer_config(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields the two options set (PackingConfig checks that they agree)."""
    return {key: value for key in ("encoding", "model")
            if (value := getattr(args, key, None)) is not None}

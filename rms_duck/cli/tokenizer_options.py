"""--encoding, --model and --tokenizer-file, shared by the commands that pack or replay."""

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
    add_tokenizer_file_argument(parser)


def add_tokenizer_file_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tokenizer-file", nargs=3, action="append", default=[],
                        metavar=("NAME", "PATH", "SHA256"),
                        help="register a Hugging Face tokenizer.json as encoding NAME (needs "
                             "rms-duck[hf]); repeatable")


def register_tokenizer_files(args: argparse.Namespace) -> None:
    """Register every --tokenizer-file (its sha256 is checked here)."""
    from ..tokens.encodings import register_tokenizer_file

    for name, path, sha256 in getattr(args, "tokenizer_file", None) or []:
        register_tokenizer_file(name, path, sha256=sha256)


def tokenizer_config(args: argparse.Namespace) -> dict[str, Any]:
    """The config fields --encoding and --model set (PackingConfig checks that they agree),
    after registering the --tokenizer-file files they may name."""
    register_tokenizer_files(args)
    return {key: value for key in ("encoding", "model")
            if (value := getattr(args, key, None)) is not None}


def check_encoding(config: Any) -> None:
    """Load the config's encoding now, so an encoding with no verified local file fails
    before a command opens (and so creates or fills) its database file."""
    from ..tokens.encodings import load_encoding

    load_encoding(config.encoding)

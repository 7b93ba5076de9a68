"""`rms-duck eval FILE.jsonl`: evidence retention of the SQL ranking plus packing.

Prints a table to standard output and a progress bar to standard error; --json writes the
results (deterministic) and the timings (not) to a file.
"""

from __future__ import annotations

import argparse
import json
import sys

from ..config import ORDERINGS, POLICIES, PackingConfig
from ..duck.connection import connect
from ..duck.ranking import RankingCues, parse_cues, set_index_language
from ..errors import ConfigError
from ..evaluation.loader import load_conversations
from ..evaluation.report import ProgressBar, format_categories, format_summary, format_table
from ..evaluation.runner import BUDGETS, EvalSettings, run_eval
from ..formats import FORMATS
from .argtypes import output_path, positive_int
from .format_modules import add_format_module_argument, import_format_modules
from .tokenizer_options import add_tokenizer_arguments, check_encoding, tokenizer_config


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="JSONL, one conversation per line (docs/evaluation.md)")
    parser.add_argument("--budgets", default=",".join(map(str, BUDGETS)),
                        help="comma-separated token budgets (default 2048,4096,8192)")
    parser.add_argument("--orderings", default=",".join(ORDERINGS),
                        help="comma-separated multi-path orderings (default: all three)")
    parser.add_argument("--policies", default=",".join(POLICIES),
                        help="comma-separated representation policies (default: both)")
    parser.add_argument("--format", default="reader",
                        help="context format: reader, auditable, compact, or one a "
                             "--format-module registers")
    parser.add_argument("--limit", type=positive_int, help="evaluate only the first N questions")
    parser.add_argument("--k", type=positive_int, default=1000,
                        help="candidates ranked per question")
    parser.add_argument("--cues", metavar="JSON",
                        help="ranking cues, e.g. '{\"speaker\": 0, \"feedback_docs\": 0}' "
                             "(missing: defaults; 0 turns one off; 'off' for none)")
    parser.add_argument("--language", help="index language: a Snowball stemmer name such as "
                                           "english or german, or none (default: english)")
    parser.add_argument("--db", default=":memory:", help="DuckDB file to store the turns in")
    parser.add_argument("--json", metavar="PATH", type=output_path,
                        help="write the results as JSON here")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    add_tokenizer_arguments(parser)
    add_format_module_argument(parser)


def run(args: argparse.Namespace) -> int:
    import_format_modules(args)  # before --format is checked: it may name their format
    if args.format not in FORMATS:
        raise ConfigError(f"--format: unknown context format {args.format!r}; use one of "
                          f"{', '.join(FORMATS)}, or name the module that registers yours "
                          "with --format-module")
    tokenizer = tokenizer_config(args)
    # A bad --encoding or --model, or one with no verified local file, fails before any work.
    check_encoding(PackingConfig(**tokenizer))
    settings = EvalSettings(
        budgets=tuple(_budget(b) for b in _names(args.budgets, "budgets")),
        orderings=_choices(args.orderings, "orderings", ORDERINGS),
        policies=_choices(args.policies, "policies", POLICIES),
        context_format=args.format, k=_positive(args.k, "k"), **tokenizer,
        limit=None if args.limit is None else _positive(args.limit, "limit"),
        cues=_cues(args.cues))
    conversations = load_conversations(args.file)
    progress = None if args.quiet else ProgressBar("eval")
    con = connect(args.db)
    try:
        if args.language:
            set_index_language(con, args.language)
        result = run_eval(conversations, settings=settings, con=con, progress=progress)
    finally:
        con.close()
    print(format_table(result))
    print()
    print(format_categories(result))
    print()
    print(format_summary(result))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(result.to_json(), handle, indent=2, sort_keys=True)
            handle.write("\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def _cues(text: str | None) -> RankingCues:
    if text is None:
        return RankingCues()
    if text.strip().lower() == "off":
        return RankingCues.off()
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        raise ConfigError(f"--cues must be a JSON object such as '{{\"speaker\": 0}}' or "
                          f"'off', got {text!r}") from None
    return parse_cues(value)


def _names(text: str, option: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    if not names:
        raise ConfigError(f"--{option} needs at least one value, got {text!r}")
    return names


def _choices(text: str, option: str, known: tuple[str, ...]) -> tuple[str, ...]:
    names = _names(text, option)
    for name in names:
        if name not in known:
            raise ConfigError(f"--{option}: unknown value {name!r}; use one of {', '.join(known)}")
    return tuple(names)


def _budget(text: str) -> int:
    value = text.lower()
    scale = 1024 if value.endswith("k") else 1
    try:
        tokens = int(value.rstrip("k")) * scale
    except ValueError:
        raise ConfigError(f"--budgets: {text!r} is not a whole number of tokens; "
                          "for example 2048,4096 or 2k,4k") from None
    return _positive(tokens, "budgets")


def _positive(value: int, option: str) -> int:
    if value <= 0:
        raise ConfigError(f"--{option} must be a positive whole number, got {value}")
    return value

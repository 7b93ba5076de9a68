"""`rms-duck pack --budget N`: candidates as JSON lines on stdin, the bundle as one JSON object.

For shells and non-Python agents. Each input line is one candidate object ({"id", "score",
"content", ...}: the fields of pack_context's candidate STRUCT). With --db the bundle and its
receipt are stored in that DuckDB file (unless --no-store); without it nothing is written.
"""

from __future__ import annotations

import argparse
import codecs
import json
import sys
from collections.abc import Iterable, Iterator
from typing import Any, BinaryIO

from ..candidates import to_candidate
from ..config import parse_config
from ..duck.surrogates import config_surrogate_error, first_surrogate
from ..duck.types import bundle_row
from ..errors import CandidateError, ConfigError
from ..packing.pipeline import _check_budget, pack_candidates
from .format_modules import add_format_module_argument, import_format_modules
from .tokenizer_options import check_encoding


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--budget", type=int, required=True, help="token budget, overhead included")
    parser.add_argument("--config", default=None,
                        help='PackingConfig fields as JSON, e.g. \'{"context_format": "compact"}\'')
    parser.add_argument("--db", default=None,
                        help="DuckDB file to store the bundle and its receipt in")
    parser.add_argument("--no-store", action="store_true",
                        help="with --db: pack with its cached line costs but store nothing")
    parser.add_argument("--namespace", default=None, help="receipt chain to extend (with --db)")
    parser.add_argument("--session-id", default=None, help="session id recorded (with --db)")
    add_format_module_argument(parser)  # a custom context_format in --config


def utf8_lines(stream: BinaryIO) -> Iterator[str]:
    """stdin's lines decoded as UTF-8 (JSON's encoding) whatever the locale, a BOM before the
    first line dropped. Decoded by the locale instead, a Latin-1 byte stopped the command
    with a UnicodeDecodeError traceback (a UTF-8 locale), or became the text "\\udce9" in
    the context and exited 0 (the C locale, whose surrogateescape kept it)."""
    for number, raw in enumerate(stream, start=1):
        if number == 1:
            raw = raw.removeprefix(codecs.BOM_UTF8)
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise CandidateError(
                f"stdin line {number} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at byte "
                f"{exc.start + 1}); re-encode the input as UTF-8, for example with "
                "iconv -f latin1 -t utf-8") from None


def read_candidates(stream: Iterable[str], *, storing: bool = False) -> list[dict[str, Any]]:
    """One JSON object per non-blank line, each checked as a candidate; a bad line is named
    by its number on stdin. storing=True also refuses text a stored bundle cannot hold."""
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CandidateError(
                f"stdin line {number} is not JSON ({exc.msg} at column {exc.pos + 1}): "
                f"{line.strip()[:80]!r}; write one candidate object per line, for example "
                '{"id": "n1", "score": 0.9, "content": "..."}') from None
        except RecursionError:  # json's own limit: a traceback before
            raise CandidateError(
                f"stdin line {number} is nested too deeply to read: {line.strip()[:80]!r}; "
                "write one flat candidate object per line (a structured_value a few levels "
                "deep)") from None
        if not isinstance(row, dict):
            raise CandidateError(
                f"stdin line {number} must be a JSON object, got {line.strip()[:80]!r}; "
                'write for example {"id": "n1", "score": 0.9, "content": "..."}')
        try:
            to_candidate(row, len(rows))
        except CandidateError as exc:
            raise CandidateError(f"stdin line {number}: {exc}") from None
        if storing:
            _check_storable(row, number)
        rows.append(row)
    return rows


def _check_storable(row: dict[str, Any], number: int) -> None:
    """JSON's \\ud800 escapes give lone surrogates, which the context escapes but the stored
    inputs (DuckDB's JSON) cannot hold: name the line and field before any file is made."""
    for key, value in row.items():
        found = first_surrogate(value, json_inside=True)
        if found is not None:
            raise CandidateError(
                f"stdin line {number}: field {key!r} holds a lone surrogate "
                f"({found!r}, half of a UTF-16 pair), which a stored bundle "
                "cannot hold; fix the text, or pack with --no-store")


def bundle_json(bundle: Any) -> dict[str, Any]:
    """The bundle's SQL STRUCT fields, plus its receipt_id when it was stored."""
    out = bundle_row(bundle)
    out["available"] = bundle.available
    out["receipt_id"] = bundle.receipt_id
    out["receipt"] = json.loads(out["receipt"])
    return out


def run(args: argparse.Namespace) -> int:
    if args.db is None and (args.namespace is not None or args.session_id is not None):
        raise ConfigError("--namespace and --session-id name the receipt chain and session of a "
                          "stored pack; add --db PATH to store it, or leave them out")
    if args.no_store and (args.namespace is not None or args.session_id is not None):
        raise ConfigError("--namespace and --session-id name the receipt chain and session of a "
                          "stored pack, but --no-store stores nothing; leave them out, or drop "
                          "--no-store")
    import_format_modules(args)  # before --config names a format it registers
    # Everything is checked before the database is opened: a bad line creates no file.
    binary = getattr(sys.stdin, "buffer", None)  # None: replaced by a text stream (tests)
    rows = read_candidates(sys.stdin if binary is None else utf8_lines(binary),
                           storing=args.db is not None and not args.no_store)
    config = parse_config(args.config)
    _check_budget(args.budget)
    check_encoding(config)
    refused = config_surrogate_error(config.to_dict(), no_store="--no-store") \
        if args.db is not None and not args.no_store else None
    if refused is not None:
        raise refused
    if args.db is None:
        bundle = pack_candidates(rows, budget=args.budget, config=config)
    else:
        from ..duck.api import pack_rows
        from ..duck.connection import connect

        con = connect(args.db)
        try:
            bundle = pack_rows(con, rows, budget=args.budget, config=config,
                               store=not args.no_store, namespace=args.namespace,
                               session_id=args.session_id)
        finally:
            con.close()
    sys.stdout.write(json.dumps(bundle_json(bundle), ensure_ascii=False) + "\n")
    return 0

"""One-line JSON escaping that stored text cannot break out of.

json.dumps already escapes quotes, backslashes and C0 controls. We also escape the Unicode
line separators that str.splitlines() honours (U+0085, U+2028, U+2029) and lone surrogates,
which cannot be encoded as UTF-8 and would otherwise crash the tokenizer or the database.
"""

from __future__ import annotations

import json
import re
from typing import Any

_encode_string = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) uses
_EXTRA = re.compile("[\u0085\u2028\u2029\ud800-\udfff]")


def _escape_match(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def harden(encoded: str) -> str:
    """Escape the characters json.dumps(ensure_ascii=False) leaves raw but we must not."""
    if encoded.isascii():
        return encoded  # none of them is ASCII: a receipt's 300 KB skip the regex scan
    return _EXTRA.sub(_escape_match, encoded) if _EXTRA.search(encoded) else encoded


def json_text(text: str) -> str:
    """A JSON string literal for text, safe to place on one line of a context."""
    if type(text) is str:
        # What json.dumps(text, ensure_ascii=False) returns, without building an encoder
        # per call: it runs once per rendered record line.
        return harden(_encode_string(text))
    return harden(json.dumps(text, ensure_ascii=False))


def json_string(text: str) -> str:
    """A JSON string literal exactly as canonical_json writes it (harden the whole text)."""
    return _encode_string(text)


def json_compact(value: Any) -> str:
    """Compact JSON (no spaces) with the same hardening, keys in the order given."""
    return harden(json.dumps(value, ensure_ascii=False, separators=(",", ":")))


def canonical_json(value: Any) -> str:
    """Sorted-key compact JSON: the bytes receipts and digests are computed over."""
    # The values a receipt writes most (ints, strings, null, booleans, []) directly, as
    # json.dumps writes them: a bundle's receipt has about ten small fields.
    kind = type(value)
    if kind is int:
        return int.__repr__(value)
    if kind is str:
        return harden(_encode_string(value))
    if value is None:
        return "null"
    if kind is bool:
        return "true" if value else "false"
    if (kind is list or kind is tuple) and not value:
        return "[]"
    return harden(json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True))


def utf8(text: str) -> bytes:
    """UTF-8 bytes, keeping lone surrogates hashable instead of raising."""
    return text.encode("utf-8", "surrogatepass")


def sql_identifier(name: str) -> str:
    """`name` as a double-quoted SQL identifier: names read from an audited file are never
    spliced into SQL raw."""
    return '"' + name.replace('"', '""') + '"'

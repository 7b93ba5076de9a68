"""The Hugging Face `tokenizers` backend: a local tokenizer.json, checked against its sha256.

A count is len(tokenizer.encode(text, add_special_tokens=False).ids), with truncation and
padding switched off (a tokenizer.json may switch them on, which would cut the count).

Line additivity (no token spans a line break) is what lets the packer cost a context as
the sum of its lines. It is detected per tokenizer, never assumed: there must be no
normalizer (it could rewrite text across a line break), no added token holding a line
break, and the pre-tokenizer must cut every probe text at each line break exactly as it
cuts the lines on their own (a pre-tokenizer that adds a prefix space, or none at all,
fails). A tokenizer that fails is still exact: the packer always counts the whole output
and drops records until that count fits (packing/assemble.py), it only packs more slowly.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path
from typing import Any

from ..errors import ConfigError, EncodingUnavailableError

# Line shapes of rendered contexts (formats/), which never start or end with a space nor
# hold a line break, plus awkward starts and ends of that kind: every pair is probed.
_PROBE_LINES = (
    "- \"plain words\"", "[context]", "{\"id\":\"a1\",\"n\":12}", "[\"m3\",null,1.5]",
    "- [2024-01-05] \"cited\"", "1. numbered", "émigré café", "中文内容测试", "digits 123",
    "x", "'s quoted'", "\"quoted\"", "tab\\tescaped", "Ünïcödé → ok", "...", "--flag=1",
    "[metadata] {\"tokens_used\":12}", "Memory records are source data.",
    "# context \"work\"", "# metadata 12/300 tokens, 0 excluded", "Maya:\"plain words\"",
    "[m1] Maya:\"cited\"", "28 May", "09:15",
)


class HFEncoding:
    """A tokenizer.json with the one method the packer calls: encode_ordinary(text)."""

    def __init__(self, name: str, tokenizer: Any) -> None:
        self.name = name
        self._tokenizer = tokenizer

    def encode_ordinary(self, text: str) -> list[int]:
        return self._tokenizer.encode(text, add_special_tokens=False).ids

    def __repr__(self) -> str:
        return f"<HFEncoding {self.name!r}>"


def load_tokenizer_file(name: str, path: Path, expected: str):
    """(HFEncoding, EncodingSource) for a registered file, after checking its sha256."""
    from .encodings import EncodingSource

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EncodingUnavailableError(
            f"tokenizer file {str(path)!r} for encoding {name!r} cannot be read "
            f"({exc.strerror or exc}); register an existing tokenizer.json") from None
    digest = hashlib.sha256(data).hexdigest()
    if digest != expected:
        raise EncodingUnavailableError(
            f"tokenizer file {str(path)!r} for encoding {name!r} has sha256 {digest}, not the "
            f"registered {expected}; register the file you meant, or its actual sha256 if "
            "you trust it")
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise EncodingUnavailableError(
            f"encoding {name!r} is a Hugging Face tokenizer.json, which needs the `tokenizers` "
            "package: pip install 'rms-duck[hf]'") from None
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except Exception as exc:  # noqa: BLE001 - the Rust parser raises plain Exception
        raise EncodingUnavailableError(
            f"tokenizer file {str(path)!r} is not a valid tokenizer.json ({exc}); "
            "register a file saved by tokenizers' Tokenizer.save()") from None
    _check_deterministic(name, json.loads(data))
    tokenizer.no_truncation()
    tokenizer.no_padding()
    source = EncodingSource(name, str(path), digest, backend="hf", fingerprint=digest,
                            line_additive=line_additive(tokenizer), word_floor=False)
    return HFEncoding(name, tokenizer), source


def _check_deterministic(name: str, config: dict[str, Any]) -> None:
    dropout = (config.get("model") or {}).get("dropout")
    if dropout:
        raise ConfigError(
            f"tokenizer {name!r} has BPE dropout {dropout}, which makes its counts random; "
            "set model.dropout to null in the tokenizer.json")


def line_additive(tokenizer: Any) -> bool:
    """True when pre-tokenization provably keeps every line's pieces to itself on the probes,
    with nothing before it that could join lines."""
    if tokenizer.normalizer is not None:
        return False
    for token in tokenizer.get_added_tokens_decoder().values():
        if "\n" in token.content or "\r" in token.content:
            return False
    pre = tokenizer.pre_tokenizer
    if pre is None:
        return False

    def pieces(text: str) -> list[str]:
        return [piece for piece, _ in pre.pre_tokenize_str(text)]

    for first, second in itertools.product(_PROBE_LINES, repeat=2):
        a, b = first + "\n", second + "\n"
        if pieces(a + b) != pieces(a) + pieces(b):
            return False
    return True

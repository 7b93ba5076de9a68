"""RFC Method 2: estimate tokens from character counts, per script.

The estimate is sum(chars_in_class / chars_per_token[class]) over character classes, rounded
up. A text's own mix of scripts is taken into account, so a Chinese sentence with a Latin
name in it is not costed as all-Latin. One ratio for every class can be forced instead.
The ratios depend on the tokenizer, so they are kept per encoding (chars_per_token_for):
fitted to o200k_base and to cl100k_base; o200k_harmony shares o200k_base's ranks; any
other encoding uses o200k_base's until ratios are set for it (set_chars_per_token, for
example from `rms-duck bench --rfc --encoding NAME`, which prints a fit).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

from ..errors import ConfigError

# Characters per token, by class: a relative-error least-squares fit (non-negative) over the
# 1,200-object corpus of `rms-duck bench --rfc` (16 languages, 10 scripts, prose, code and
# JSON). There the estimate's median error is 4.4% (o200k_base) and 3.7% (cl100k_base), its
# 95th percentile 17.7% and 16.3% (docs/evaluation.md has the figures per language and
# type). tests/test_bench_rfc.py re-fits both and compares.
O200K_CHARS_PER_TOKEN: dict[str, float] = {
    "latin": 5.56,
    "latin_ext": 1.63,
    "digit": 0.83,
    "space": 3.15,
    "symbol": 2.52,
    "cyrillic": 3.34,
    "greek": 2.67,
    "arabic": 3.84,
    "hebrew": 2.51,
    "devanagari": 3.65,
    "thai": 2.41,
    "cjk": 1.47,
    "hangul": 1.59,
    "other": 0.63,
}
CL100K_CHARS_PER_TOKEN: dict[str, float] = {
    "latin": 4.72,
    "latin_ext": 0.68,
    "digit": 0.82,
    "space": 4.24,
    "symbol": 2.57,
    "cyrillic": 1.76,
    "greek": 0.99,
    "arabic": 1.3,
    "hebrew": 0.91,
    "devanagari": 0.85,
    "thai": 1.04,
    "cjk": 1.15,
    "hangul": 0.88,
    "other": 0.2,
}
# The ratios of the default encoding (o200k_base).
DEFAULT_CHARS_PER_TOKEN = O200K_CHARS_PER_TOKEN
_BY_ENCODING: dict[str, dict[str, float]] = {
    "o200k_base": O200K_CHARS_PER_TOKEN,
    "o200k_harmony": O200K_CHARS_PER_TOKEN,  # the same ranks and pattern
    "cl100k_base": CL100K_CHARS_PER_TOKEN,
}


def chars_per_token_for(encoding: str | None = None) -> dict[str, float]:
    """The per-class ratios used for `encoding` (a copy): fitted ones, else o200k_base's."""
    return dict(_BY_ENCODING.get(encoding or "o200k_base", O200K_CHARS_PER_TOKEN))


def set_chars_per_token(encoding: str, ratios: Mapping[str, float]) -> None:
    """Use these per-class ratios (classes left out keep o200k_base's) for `encoding`."""
    merged = dict(O200K_CHARS_PER_TOKEN)
    for name, value in ratios.items():
        if name not in merged:
            raise ConfigError(f"unknown character class {name!r}; known: {', '.join(merged)}")
        merged[name] = _check_ratio(f"chars_per_token[{name!r}]", value)
    _BY_ENCODING[encoding] = merged

_CLASSES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("latin", re.compile(r"[A-Za-z]")),
    # Accented Latin letters cost far more than ASCII ones (Vietnamese, Polish, ...).
    ("latin_ext", re.compile(r"[\u00c0-\u024f\u1e00-\u1eff]")),
    ("digit", re.compile(r"[0-9]")),
    ("space", re.compile(r"\s")),
    ("symbol", re.compile(r"[!-/:-@\[-`{-~\u00a0-\u00bf\u2000-\u206f]")),
    ("cyrillic", re.compile(r"[\u0400-\u052f]")),
    ("greek", re.compile(r"[\u0370-\u03ff\u1f00-\u1fff]")),
    ("arabic", re.compile(r"[\u0600-\u06ff\u0750-\u077f\ufb50-\ufdff\ufe70-\ufeff]")),
    ("hebrew", re.compile(r"[\u0590-\u05ff]")),
    ("devanagari", re.compile(r"[\u0900-\u097f]")),
    ("thai", re.compile(r"[\u0e00-\u0e7f]")),
    ("cjk", re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff00-\uffef]")),
    ("hangul", re.compile(r"[\uac00-\ud7af\u1100-\u11ff]")),
)


def class_counts(text: str) -> dict[str, int]:
    """Characters of `text` per class; whatever no class claims counts as 'other'."""
    counts = {name: len(pattern.findall(text)) for name, pattern in _CLASSES}
    counts["other"] = max(0, len(text) - sum(counts.values()))
    return counts


def estimate_tokens(text: str, chars_per_token: float | Mapping[str, float] | None = None,
                    *, encoding: str | None = None) -> int:
    """ceil(chars / chars_per_token), per class unless one ratio is forced. Classes not given
    use the ratios of `encoding` (default: o200k_base).

    >>> estimate_tokens("hello world", 4.0)
    3
    """
    if not text:
        return 0
    if chars_per_token is not None and not isinstance(chars_per_token, Mapping):
        ratio = _check_ratio("chars_per_token", chars_per_token)
        return math.ceil(len(text) / ratio)
    ratios = chars_per_token_for(encoding)
    for name, value in (chars_per_token or {}).items():
        if name not in ratios:
            raise ConfigError(f"unknown character class {name!r}; known: {', '.join(ratios)}")
        ratios[name] = _check_ratio(f"chars_per_token[{name!r}]", value)
    counts = class_counts(text)
    return math.ceil(sum(n / ratios[name] for name, n in counts.items() if n))


def _check_ratio(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and value > 0
    ):
        raise ConfigError(f"{field} must be a positive number of characters per token, "
                          f"got {value!r}; try 4.0 for English prose")
    return float(value)

"""RFC Method 2: estimate tokens from character counts, per script and per encoding.

The text is cut into the pieces the encoding's own pre-tokenizer cuts (words with their
leading space, runs of up to three digits, punctuation runs, whitespace). A piece the
vocabulary holds whole costs one token (a dictionary lookup, no merging); any other piece
costs ceil(sum over its scripts of chars / chars_per_token[script]) tokens, at least one
(punctuation counts a token per three marks):
BPE never merges across pieces, so a piece is never cheaper than one token. A space that
leads a word is merged into it and costs nothing.

The characters per token of each script come from the encoding's vocabulary, not from a
sample of text (derive.py, tables in estimate_tables.py), so every script Unicode encodes
has one. docs/estimates.md publishes the error per script on held-out text in dozens of
languages; `rms-duck bench --estimates` reproduces it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from functools import lru_cache

import regex

from ..errors import ConfigError, did_you_mean
from .encodings import DEFAULT_ENCODING
from .estimate_tables import CHARS_PER_TOKEN, PATTERNS
from .scripts import SPACE, SYMBOL, script_of

# A script or class no table knows (a character Unicode assigned after this Python) is
# costed like a character spelt in bytes: up to four tokens.
UNKNOWN_CHARS_PER_TOKEN = 0.25
# Encodings that share another's ranks and pre-tokenizer share its table.
_SAME_AS = {"o200k_harmony": "o200k_base"}
# Ratios a caller set for an encoding with no derived table (set_chars_per_token).
_BY_ENCODING: dict[str, dict[str, float]] = {}


def _table_name(encoding: str) -> str:
    """The derived table an encoding uses: its own, its twin's, else o200k_base's."""
    encoding = _SAME_AS.get(encoding, encoding)
    return encoding if encoding in CHARS_PER_TOKEN else "o200k_base"


def chars_per_token_for(encoding: str | None = None) -> dict[str, float]:
    """The per-script ratios for `encoding` (a copy): derived from its vocabulary, set by
    set_chars_per_token(), else o200k_base's (the closest modern vocabulary)."""
    name = encoding or DEFAULT_ENCODING
    if name in _BY_ENCODING:
        return dict(_BY_ENCODING[name])
    return dict(CHARS_PER_TOKEN[_table_name(name)])


def set_chars_per_token(encoding: str, ratios: Mapping[str, float]) -> None:
    """Use these per-script ratios for an encoding without a derived table (scripts left out
    keep o200k_base's). Its estimates then use the ratios alone, with no vocabulary lookup."""
    merged = dict(CHARS_PER_TOKEN["o200k_base"])
    for script, value in ratios.items():
        if script not in merged:
            raise ConfigError(f"unknown character class {script!r}; known: "
                              f"{', '.join(sorted(merged))}")
        merged[script] = _check_ratio(f"chars_per_token[{script!r}]", value)
    _BY_ENCODING[encoding] = merged


DEFAULT_CHARS_PER_TOKEN: dict[str, float] = chars_per_token_for(DEFAULT_ENCODING)


@lru_cache(maxsize=16)
def _pattern(encoding: str) -> regex.Pattern[str]:
    return regex.compile(PATTERNS[_table_name(encoding)])


def estimate_tokens(text: str, chars_per_token: float | Mapping[str, float] | None = None,
                    *, encoding: str | None = None) -> int:
    """Method 2 estimate of `text`'s tokens under `encoding` (default: the default encoding).

    Args:
        chars_per_token: one ratio for every character (plain ceil(chars / ratio)), or a
            mapping that overrides the ratio of some scripts (keys as scripts.script_of).

    >>> estimate_tokens("hello world", 4.0)
    3
    >>> estimate_tokens("hello world")
    2
    """
    if not text:
        return 0
    if chars_per_token is not None and not isinstance(chars_per_token, Mapping):
        ratio = _check_ratio("chars_per_token", chars_per_token)
        return math.ceil(len(text) / ratio)
    name = encoding or DEFAULT_ENCODING
    if not isinstance(name, str) or (name not in CHARS_PER_TOKEN and name not in _BY_ENCODING
                                     and name not in _SAME_AS):
        _check_encoding_name(name)
    ratios = chars_per_token_for(name)
    for script, value in (chars_per_token or {}).items():
        if script not in ratios:
            raise ConfigError(f"unknown character class {script!r} in chars_per_token; "
                              f"known: {', '.join(sorted(ratios))}")
        ratios[script] = _check_ratio(f"chars_per_token[{script!r}]", value)
    return _estimate(text, name, ratios)


def _check_encoding_name(name: object) -> None:
    """An encoding no tokenizer knows (a typo such as 'o200k') was estimated silently with
    o200k_base's ratios, where SQL's rms_token_estimate refuses it."""
    from .encodings import known_encodings, model_name_hint

    known = known_encodings()
    if isinstance(name, str) and name in known:
        return
    model = model_name_hint(name) if isinstance(name, str) else None
    if model is not None:  # as rms_token_estimate says: 'gpt-4o' was "Did you mean 'gpt2'?"
        raise ConfigError(f"estimate_tokens: {model}")
    hint = did_you_mean(name, known) if isinstance(name, str) else ""
    raise ConfigError(f"estimate_tokens encoding must name an encoding, got {name!r}.{hint} "
                      f"Known encodings: {', '.join(known)} (or one given ratios with "
                      "set_chars_per_token)")


def _estimate(text: str, encoding: str, ratios: Mapping[str, float]) -> int:
    vocabulary = None if encoding in _BY_ENCODING else _vocabulary(_table_name(encoding))
    total = 0
    for piece in _pattern(encoding).findall(text):
        if vocabulary is not None and piece.encode("utf-8", "surrogatepass") in vocabulary:
            total += 1  # the vocabulary holds the whole piece: one token, no estimate needed
            continue
        cost, symbols = 0.0, 0
        for i, ch in enumerate(piece):
            script = script_of(ch)
            if script == SPACE or (i == 0 and script == SYMBOL and len(piece) > 1
                                   and script_of(piece[1]) not in (SPACE, SYMBOL)):
                continue  # a leading space or mark is merged into the word it precedes
            if script == SYMBOL:
                symbols += 1
                continue
            cost += 1.0 / ratios.get(script, UNKNOWN_CHARS_PER_TOKEN)
        # Punctuation runs such as '."' or '):' are single tokens up to about three marks
        # in both vocabularies, like the pre-tokenizer's digit groups.
        cost += math.ceil(symbols / 3)
        total += max(1, math.ceil(cost - 1e-9))
    return total


@lru_cache(maxsize=8)
def _vocabulary(encoding: str) -> Mapping[bytes, int] | None:
    """The encoding's BPE ranks when they load offline, else None (ratios alone)."""
    from ..errors import EncodingUnavailableError
    from .derive import load_ranks

    try:
        return load_ranks(encoding)
    except (EncodingUnavailableError, ImportError, AttributeError):
        return None


# A token covers at least one byte and a character at most four (UTF-8), so no text has
# fewer characters per token than this; a smaller ratio only inflates (or overflows) counts.
MIN_CHARS_PER_TOKEN = 0.25


def _check_ratio(field: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
        math.isfinite(value) and value >= MIN_CHARS_PER_TOKEN
    ):
        raise ConfigError(f"{field} must be a number of characters per token of at least "
                          f"{MIN_CHARS_PER_TOKEN} (a token is at least one byte, a character "
                          f"at most four), got {value!r}; try 4.0 for English prose")
    return float(value)


# -- Method 3: the estimate rms_nodes stores at creation -----------------------------------
# A plain INSERT must get a value, and DuckDB computes only a generated column at insert
# time, from pure SQL without lambdas. So the stored estimate is Method 2 in its literal RFC
# form, ceil(sum over classes of chars / chars_per_token), over the classes below with the
# vocabulary-derived ratios of the default encoding; the schema's generated column is
# stored_estimate_sql() verbatim (tests/test_rfc_gaps.py keeps the two in step).
STORED_CLASSES: tuple[tuple[str, str], ...] = (
    ("latin", "[A-Za-z]"),
    ("cyrillic", r"\p{Cyrillic}"),
    ("greek", r"\p{Greek}"),
    ("arabic", r"\p{Arabic}"),
    ("hebrew", r"\p{Hebrew}"),
    ("devanagari", r"\p{Devanagari}"),
    ("han", r"\p{Han}"),
    ("hangul", r"\p{Hangul}"),
    ("hiragana", r"\p{Hiragana}"),
    ("katakana", r"\p{Katakana}"),
    ("thai", r"\p{Thai}"),
    ("digit", "[0-9]"),
    ("symbol", r"[^\s\p{L}\p{M}\p{N}]"),
)
_OTHER_LETTERS = r"[\p{L}\p{M}\p{N}]"  # minus the classes above: accented Latin, other scripts
_OTHER_CHARS_PER_TOKEN = 0.8
_STORED_ENCODING = DEFAULT_ENCODING


def _stored_terms() -> list[tuple[str, int]]:
    """(class pattern, millionths of a token per character), integers so SQL and Python agree
    exactly and the column needs no function outside DuckDB's core (a database file must
    reopen offline, without autoloading an extension)."""
    table = CHARS_PER_TOKEN[_STORED_ENCODING]
    return [(pattern, round(1_000_000 / table[name])) for name, pattern in STORED_CLASSES]


_OTHER_WEIGHT = round(1_000_000 / _OTHER_CHARS_PER_TOKEN)
# RE2's \s, which the column's SQL uses: ASCII whitespace but the vertical tab. Python's
# would also take the no-break, em and ideographic spaces, which the column counts as marks.
_RE2_SPACE = "\t\n\f\r "


def stored_estimate(text: str) -> int:
    """What rms_nodes.token_cost_estimate holds for `text` (the SQL column, in Python)."""
    total = 0
    letters = 0
    for i, (pattern, weight) in enumerate(_stored_terms()):
        n = len(regex.findall(pattern.replace(r"\s", _RE2_SPACE), text))
        total += n * weight
        if i < len(STORED_CLASSES) - 2:  # the letter classes, not digits or symbols
            letters += n
    other = (len(regex.findall(_OTHER_LETTERS, text)) - len(regex.findall("[0-9]", text))
             - letters)
    total += max(other, 0) * _OTHER_WEIGHT
    return (total + 999_999) // 1_000_000


def stored_estimate_sql(column: str = "content") -> str:
    """The same estimate as one pure-SQL expression (RE2 classes), for a generated column.

    DuckDB computes a generated column on every insert and read, binding the expression and
    compiling its patterns once per statement, so the expression is written for that. A
    class's count is the length minus what is left once its own characters are removed
    (removing the few is far cheaper than removing all the rest), with the lengths summed
    out algebraically so each class costs three function calls; symbols are what is left
    of the text without whitespace and the letter-mark-number class; a negative count is
    clamped by a TRY_CAST instead of a CASE that repeated 14 patterns. Same values as
    earlier_stored_estimate_sql(): about a third of its time per row and two thirds of its
    time to bind."""
    def left(pattern: str) -> str:
        return f"length(regexp_replace({column}, '{pattern}', '', 'g'))"
    counted = _stored_terms()[:-1]  # the letter classes and digits
    symbol_weight = _stored_terms()[-1][1]
    letters = left(_negate(_OTHER_LETTERS))  # what is left is letters, marks and numbers
    expr = f"length({column}) * {sum(w for _, w in counted)}" + "".join(
        f" - {left(p)} * {w}" for p, w in counted)
    not_spaces = left(r"\s")  # what is left is everything but (RE2's ASCII) whitespace
    expr += f" + ({not_spaces} - {letters}) * {symbol_weight}"
    other = f"{letters} - length({column}) * {len(counted)} + " + " + ".join(
        left(p) for p, _ in counted)
    # max(other, 0) with `other` written once; greatest() would need the core_functions
    # extension to replay a WAL, and a file must reopen offline.
    expr += f" + coalesce(TRY_CAST({other} AS UBIGINT), 0) * {_OTHER_WEIGHT}"
    return f"CAST(({expr} + 999999) // 1000000 AS INTEGER)"


def earlier_stored_estimate_sql(column: str = "content") -> str:
    """The generated column as shipped until 2026-12-02: the same values, written as a count
    of what remains when everything outside each class is removed. Files created then keep
    it (DuckDB cannot change a generated column in place), so verification accepts it."""
    def chars(pattern: str) -> str:
        return f"length(regexp_replace({column}, '{_negate(pattern)}', '', 'g'))"
    terms = [f"{chars(p)} * {w}" for p, w in _stored_terms()]
    other = (f"{chars(_OTHER_LETTERS)} - {chars('[0-9]')} - "
             + " - ".join(chars(p) for p, _ in _stored_terms()[:-2]))
    terms.append(f"(CASE WHEN {other} > 0 THEN {other} ELSE 0 END) * {_OTHER_WEIGHT}")
    return "CAST((" + " + ".join(terms) + " + 999999) // 1000000 AS INTEGER)"


def _negate(pattern: str) -> str:
    if pattern.startswith("[^"):
        return "[" + pattern[2:]
    return f"[^{pattern[1:-1]}]" if pattern.startswith("[") else f"\\P{{{pattern[3:-1]}}}"

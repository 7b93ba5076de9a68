"""The writing system of a character, from the Unicode database that ships with Python.

Letters and marks are keyed by the first word of their Unicode name, which is their script
for every script Unicode encodes ("BENGALI LETTER KA" -> "bengali"); CJK ideographs are
"han"; ASCII letters are "latin" and other Latin letters "latin_ext" (accented letters cost
far more tokens than ASCII ones). Digits, spaces and symbols (punctuation included) have a
class each, whatever their script.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache

_HAN = frozenset({"cjk", "kangxi", "ideographic"})
SPACE, DIGIT, SYMBOL = "space", "digit", "symbol"


@lru_cache(maxsize=65_536)
def script_of(ch: str) -> str:
    """'latin', 'latin_ext', 'cyrillic', 'bengali', 'han', ..., 'digit', 'space', 'symbol'."""
    if ch.isspace():
        return SPACE
    category = unicodedata.category(ch)
    if category == "Nd":
        return DIGIT
    if category[0] in "PSZC":
        return SYMBOL
    if ch.isascii():
        return "latin"
    name = unicodedata.name(ch, "")
    word = name.split(" ", 1)[0].lower() if name else "unknown"
    if word == "latin":
        return "latin_ext"
    if word in _HAN:
        return "han"
    return word

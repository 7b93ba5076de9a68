"""The part of a JSON string that every line showing it tokenizes the same way.

A record's text reaches a context line as a JSON string, `"` + body + `"`, with anything
around it. Whatever surrounds it, the pre-tokenizer of cl100k_base and o200k_base cuts the
body into the same pieces between two places this module finds, so BPE (which never
merges across pieces) spends the same tokens there. Their count, plus one token for each
quote, is a floor on the cost of any such line: for a text without spaces (Chinese,
Japanese, Thai clauses) it is nearly the text's own count, where the word-run floor is one.

A place `i` in the body is a *forced* piece boundary when no piece of any scan of any
string holding `"` + body + `"` spans it:

- **after a letter, before punctuation:** body[i - 1] is a letter and body[i] is
  punctuation, a symbol or a space separator, not an apostrophe. A letter lies only in a
  letter run (which stops before anything that is neither a letter nor a mark), possibly
  followed by a contraction (which starts with an apostrophe), or in a contraction (which
  ends with a letter). So the piece holding body[i - 1] ends at i.
- **before the last space of a run:** body[i] is " " and body[i + 1] is a letter, mark,
  digit, punctuation or symbol. A space starts a piece only as its first character, and
  no letter, digit or punctuation piece takes one later on; a run of spaces is taken by
  `\\s+(?!\\S)`, which gives back the run's last space because a non-space follows it.

Neither pattern looks behind, and every alternative decides from a run of one class plus
the character after it (contractions: at most three characters). Between the first forced
boundary b0 and the last one b1, each such run ends at or before b1 and the character
after it is still in the body (b1 is followed by a letter, digit, punctuation or the space
before one), so both scans make the same pieces from b0 to b1, and those are the pieces of
body[b0:b1] scanned alone (the last one ends at b1 there too: a letter run, a digit group,
or a run of spaces ends the same before end-of-text as before body[b1]).
tests/test_textfloor.py checks every step against tiktoken's own tokens with hypothesis,
for both encodings, with texts and surroundings drawn from every character class the
patterns tell apart.

Unicode classes are read with this Python's unicodedata and must agree with the
tokenizer's: a character counts only when its category is the same in Unicode 3.2
(unicodedata.ucd_3_2_0), so a class that moved between Unicode versions never decides a
boundary.
"""

from __future__ import annotations

import unicodedata

_OLD = unicodedata.ucd_3_2_0
_PUNCTUATION = frozenset(("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So",
                          "Zs"))
_NOT_SPACE = "LMNPS"  # first letters of the categories that are never white space


def _category(ch: str) -> str:
    """ch's general category when Unicode 3.2 agrees on it, else "" (never decides)."""
    category = unicodedata.category(ch)
    return category if ch < "\x80" or _OLD.category(ch) == category else ""


def _forced(body: str, i: int) -> bool:
    """Whether no piece of any line showing `"` + body + `"` spans place i of body."""
    ch = body[i]
    if ch == " ":
        if i + 1 < len(body):
            after = _category(body[i + 1])
            if after and after[0] in _NOT_SPACE:
                return True
    elif ch == "'":
        return False
    return _category(ch) in _PUNCTUATION and _category(body[i - 1])[:1] == "L"


def shared_span(body: str) -> tuple[int, int] | None:
    """(b0, b1): the first and last forced boundaries of a JSON string's body (its text
    between the quotes, escaped), or None when it has fewer than two."""
    n = len(body)
    first = next((i for i in range(1, n) if _forced(body, i)), None)
    if first is None:
        return None
    last = next(i for i in range(n - 1, first - 1, -1) if _forced(body, i))
    return (first, last) if last > first else None

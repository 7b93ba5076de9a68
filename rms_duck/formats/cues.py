"""Cues read from record text: does it already state a date, or begin with its speaker?

They let the reader format drop a bracketed date or a speaker name that the text repeats.
"""

from __future__ import annotations

import re
from datetime import datetime

from ..timefmt import as_utc
from .base import register_memo

_MONTHS = (
    "january", "february", "march", "april", "may", "june", "july",
    "august", "september", "october", "november", "december",
)
_LEADING_GROUP = re.compile(r"\s*[(\[]([^()\[\]\n]{1,80})[)\]]")
# More than the longest text a day's pattern matches ("09th of september., 2024": 25).
MATCH_SPAN = 40


# Each day's pattern, compiled once: a render memo, so the bench's cold packs (which empty
# those) compile them again, as a fresh process does.
_PATTERNS: dict[tuple[int, int, int], re.Pattern[str]] = register_memo({})
_PATTERNS_LIMIT = 4096


def _date_pattern(year: int, month: int, day: int) -> re.Pattern[str]:
    key = (year, month, day)
    pattern = _PATTERNS.get(key)
    if pattern is None:
        if len(_PATTERNS) >= _PATTERNS_LIMIT:
            _PATTERNS.clear()
        pattern = _PATTERNS[key] = _compiled(year, month, day)
    return pattern


def _compiled(year: int, month: int, day: int) -> re.Pattern[str]:
    name = _MONTHS[month - 1]
    month_names = {name, name[:3]} | ({"sept"} if month == 9 else set())
    month_alt = "|".join(sorted(month_names, key=len, reverse=True)) + r")\.?"
    y, m, d = f"{year:04d}", str(month), str(day)
    numeric = rf"{y}[-/.]0?{m}[-/.]0?{d}(?!\d)"
    day_first = rf"(?<!\d)0?{d}(?:st|nd|rd|th)? (?:of )?(?:{month_alt},? {y}"
    month_first = rf"\b(?:{month_alt} 0?{d}(?:st|nd|rd|th)?,? {y}"
    return re.compile(f"{numeric}|{day_first}|{month_first}", re.IGNORECASE)


def text_states_date(text: str, when: datetime) -> bool:
    """True when the text opens with the UTC calendar date of `when`.

    Checked in a leading (...) or [...] group of at most 80 characters, or at the very start.
    """
    v = as_utc(when)
    # Every form spells the year's four digits, and none matches more than MATCH_SPAN
    # characters: a text without the year where a date is looked for states none, so the
    # day's pattern is not compiled for it (0.8 ms each, once per distinct day and
    # process: 0.4 s of a cold 5,000-bundle GROUP BY, in each process).
    year = f"{v.year:04d}"
    group = _LEADING_GROUP.match(text)
    if group and year in group.group(1) \
            and _date_pattern(v.year, v.month, v.day).search(group.group(1)):
        return True
    start = text.lstrip(" \t([")
    return year in start[:MATCH_SPAN] \
        and _date_pattern(v.year, v.month, v.day).match(start) is not None


def text_states_speaker(text: str, speaker: str) -> bool:
    """True when the text begins with 'Speaker:' (case-insensitive), after one leading group."""
    body = text
    group = _LEADING_GROUP.match(body)
    if group:
        body = body[group.end():]
    body = body.lstrip()
    prefix = speaker + ":"
    return body[: len(prefix)].casefold() == prefix.casefold()

"""Optional task guidance, added only when the packed context leaves room for it.

It never displaces or downgrades a record: the packer selects first, then prepends this
one line if the whole output still fits. Modes: off, temporal (date arithmetic and
ordering questions only) and all (adds current-state and personalization guidance).
"""

from __future__ import annotations

import re
from datetime import datetime

from ..timefmt import iso

_TEMPORAL = re.compile(
    r"\b(how (many|long) (days|weeks|months|years|hours)|how long ago|ago\b|since when|"
    r"when did|what (date|day|year|month)|before|after|earlier|later|first|last|"
    r"which came first|in what order|order of)\b",
    re.IGNORECASE,
)
_CURRENT = re.compile(r"\b(now|currently|current|still|latest|these days)\b", re.IGNORECASE)
_PERSONAL = re.compile(r"\b(recommend|suggest|should i|what would i like|prefer)\b", re.IGNORECASE)


def build_guidance(query: str | None, reference_time: datetime | None, *, mode: str,
                   date_word: str) -> str | None:
    """One guidance line for this query, or None when no rule applies."""
    if mode == "off" or not query:
        return None
    parts = []
    if _TEMPORAL.search(query):
        when = f"QUESTION TIME: {iso(reference_time)}. " if reference_time is not None else ""
        parts.append(
            f"{when}TEMPORAL TASK: compute dates and durations from each record's {date_word}, "
            "not from the order of lines; say so when a needed date is missing."
        )
    if mode == "all" and _CURRENT.search(query):
        parts.append("CURRENT-STATE TASK: prefer the most recent record; do not merge "
                     "conflicting records into one answer.")
    if mode == "all" and _PERSONAL.search(query):
        parts.append("PERSONALIZATION TASK: use the stated preferences in the records; "
                     "do not invent ones they do not state.")
    return "Guidance: " + " ".join(parts) if parts else None

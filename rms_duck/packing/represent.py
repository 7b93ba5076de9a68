"""The RFC section 4 representations of one candidate, as the text a record line carries.

FULL is the whole stored text. PROSE is a stored prose summary, used only when one was
stored and differs from the text (never generated here). STRUCTURED is the whole text plus
its typed fields, so it is never shorter than FULL. KEY_VALUE and REFERENCE are text-free
pointers. No representation is ever a slice of the text.
"""

from __future__ import annotations

from ..records import TEXT_LEVELS, Candidate, Level
from ..timefmt import iso

# Enum members as module constants: attribute access on an enum class is slow in 3.11, and
# this runs for every level of every record a pack prices.
_FULL, _PROSE = Level.FULL, Level.PROSE


def representation_text(c: Candidate, level: Level) -> str | None:
    """The text for `level`, or None when the candidate has no such representation."""
    if level is _FULL:
        return c.content
    if level is _PROSE:
        prose = c.prose
        return prose if prose is not None and prose.strip() and prose != c.content else None
    if level is Level.STRUCTURED:
        parts = [f"type: {c.type.value}", f"confidence: {c.confidence:g}"]
        if c.event_time is not None:
            parts.append(f"date: {iso(c.event_time)}")
        if c.structured_value is not None:
            parts.append(f"value: {c.structured_value}")
        parts.append(f"text: {c.content}")
        return "; ".join(parts)
    if level is Level.KEY_VALUE:
        parts = [f"id: {c.id}", f"type: {c.type.value}", f"confidence: {c.confidence:g}"]
        if c.event_time is not None:
            parts.append(f"date: {iso(c.event_time)}")
        return "; ".join(parts)
    return f"{c.type.value}:{c.id}"


def has_memory_text(c: Candidate, level: Level) -> bool:
    """Whether a record packed at `level` shows stored memory text (receipts' has_content,
    receipts.has_content, by the level's name)."""
    return c.has_text and level in TEXT_LEVELS

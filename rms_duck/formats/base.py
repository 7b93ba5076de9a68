"""What a context format is: a header, section labels, one line per record, a metadata line.

Every line starts with a non-space character and contains no line break, so a context's
token count is exactly the sum of the counts of each `line + "\\n"` (see tokens.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from ..escape import json_text
from ..model import Candidate, Level, Section


@dataclass(frozen=True, slots=True)
class RecordView:
    """Everything a renderer may print about one packed record."""

    candidate: Candidate
    level: Level
    text: str
    ref: str | None
    contradicts: tuple[str, ...] = ()


class Format(Protocol):
    name: str
    text_levels_only: bool

    def header(self, *, speakers: bool, citations: bool) -> str: ...

    def section_label(self, section: Section, namespace: str | None) -> str: ...

    def record_line(self, view: RecordView) -> str: ...

    def shows_speaker(self, view: RecordView) -> bool: ...


def section_label(section: Section, namespace: str | None) -> str:
    """'[facts]', or '[facts namespace "work"]' for a named namespace."""
    if namespace is None:
        return f"[{section.value}]"
    return f"[{section.value} namespace {json_text(namespace)}]"

"""Folded repeated text (RFC section 5, reader format): show each source sentence once.

A claim extracted from a turn often repeats the turn's text. A record folds into another
packed record from one of its source events (evidence_ids) when its text is contained in
the other's and nothing it shows would be lost: the same reader tags, the same event time
(if it has one), the same caller-closed validity window (if it shows one) and the same
speaker (if it has one). Folded records are excluded with reason FOLDED.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..formats.base import RecordView
from ..formats.reader import reader_tags
from ..timefmt import as_utc
from .compat import version6

if TYPE_CHECKING:
    from .layout import Entry


def folds_into(inner: RecordView, outer: RecordView) -> bool:
    """True when `outer`'s line shows everything `inner`'s line would."""
    text = inner.text.strip()
    if not text or text not in outer.text:
        return False
    if inner.contradicts and not version6():
        # Its conflict pair label would leave the context with it: while packing every pair
        # shares one provisional label, so the tags below cannot tell two pairs apart.
        return False
    if reader_tags(inner) != reader_tags(outer):
        return False
    a, b = inner.candidate, outer.candidate
    if a.event_time is not None and (
        b.event_time is None or as_utc(a.event_time) != as_utc(b.event_time)
    ):
        return False
    if _window(a) is not None and _window(a) != _window(b):
        return False
    return a.speaker is None or a.speaker == b.speaker


def _window(c):
    if c.valid_to is None or c.superseded_by is not None:
        return None
    start = as_utc(c.valid_from) if c.valid_from is not None else None
    return start, as_utc(c.valid_to)


class FoldIndex:
    """The packed records others may fold into (those citing a source event), by candidate
    id: one collection however many sources they share, so a pack whose records all cite
    the same events visits each packed record once per check, not once per shared source.
    The first test of folds_into (is the inner text in the outer one?) runs on their texts,
    kept beside them: joined, for one test against all of them at once in C."""

    __slots__ = ("entries", "_texts", "_stripped", "_joined")

    def __init__(self) -> None:
        self.entries: dict[str, Entry] = {}
        self._texts: dict[str, str] = {}
        self._stripped: dict[str, str] = {}
        self._joined: str | None = ""

    def add(self, entry: Entry) -> None:
        key, text = entry.candidate.id, entry.view.text
        self.entries[key] = entry
        self._texts[key] = text
        self._stripped[key] = text.strip()
        self._joined = None

    def discard(self, entry: Entry) -> None:
        key = entry.candidate.id
        if self.entries.get(key) is entry:
            del self.entries[key], self._texts[key], self._stripped[key]
            self._joined = None

    def clear(self) -> None:
        self.entries.clear()
        self._texts.clear()
        self._stripped.clear()
        self._joined = ""

    def showing(self, text: str) -> list[Entry]:
        """The records whose text holds `text` (none, mostly: tested at once first)."""
        if self._joined is None:
            self._joined = "\x00".join(self._texts.values())
        if text not in self._joined:
            return []
        entries = self.entries
        return [entries[key] for key, outer in self._texts.items() if text in outer]

    def shown_in(self, text: str) -> list[Entry]:
        """The records whose stripped text `text` holds."""
        entries = self.entries
        return [entries[key] for key, inner in self._stripped.items() if inner in text]

"""Folded repeated text (RFC section 5, reader format): show each source sentence once.

A claim extracted from a turn often repeats the turn's text. A record folds into another
packed record from one of its source events (evidence_ids) when its text is contained in
the other's and nothing it shows would be lost: the same reader tags, the same event time
(if it has one), the same caller-closed validity window (if it shows one) and the same
speaker (if it has one). Folded records are excluded with reason FOLDED.
"""

from __future__ import annotations

from ..formats.base import RecordView
from ..formats.reader import reader_tags
from ..timefmt import as_utc


def folds_into(inner: RecordView, outer: RecordView) -> bool:
    """True when `outer`'s line shows everything `inner`'s line would."""
    text = inner.text.strip()
    if not text or text not in outer.text:
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

"""Registered ReaderFormat subclasses whose version 5 receipts must replay byte for byte
(tests/data/receipts_v5_custom_readers): each overrides one thing and inherits the rest."""

from __future__ import annotations

from rms_duck.formats import FORMATS, register_format
from rms_duck.formats.reader import ReaderFormat


class SuperRecord(ReaderFormat):
    """Appends a marker to the reader's own record line, reached through super()."""

    name = "super-record"

    def record_line(self, view):
        return super().record_line(view) + " <"


class SuperSection(ReaderFormat):
    """Upper-cases the reader's own section label, reached through super()."""

    name = "super-section"

    def section_label(self, section, namespace):
        return super().section_label(section, namespace).upper()


class MonthReader(ReaderFormat):
    """Writes (year, month, day, time) date lines of its own shape."""

    name = "month-reader"

    def date_lines(self, view):
        when = view.candidate.event_time
        if when is None:
            return ()
        return (str(when.year), when.strftime("%B"), str(when.day), when.strftime("%H:%M"))


class QuietSpeakers(ReaderFormat):
    """Never shows a speaker; inherits the reader's record line."""

    name = "quiet-speakers"

    def shows_speaker(self, view):
        return False


SUBCLASSES = (SuperRecord, SuperSection, MonthReader, QuietSpeakers)


def register_all() -> None:
    for cls in SUBCLASSES:
        register_format(cls())


def unregister_all() -> None:
    from rms_duck.formats import LEGACY_FORMATS

    for cls in SUBCLASSES:
        FORMATS.pop(cls.name, None)
        for name in [n for n in LEGACY_FORMATS if n.startswith(cls.name + "@")]:
            LEGACY_FORMATS.pop(name)

"""What a context format is: a header, section labels, one line per record, a metadata line.

Every line starts with a non-space character other than "/" and contains no line break, so
a context's token count is exactly the sum of the counts of each `line + "\\n"` (see
tokens/counter.py).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any, Protocol, TypeVar

from ..escape import json_text
from ..records import Candidate, Level, Section
from .metadata import metadata_line


@dataclass(frozen=True, slots=True)
class RecordView:
    """Everything a renderer may print about one packed record."""

    candidate: Candidate
    level: Level
    text: str
    ref: str | None
    contradicts: tuple[str, ...] = ()
    conflict_labels: tuple[str, ...] = ()  # pair labels (c1, ...) for formats that name pairs
    # A speaker line above the record's line names its speaker (formats with speaker_lines),
    # so its line leaves the speaker out.
    speaker_above: bool = False


class Format(Protocol):
    """A context format. The packer asks it these facts instead of testing its name."""

    name: str
    text_levels_only: bool  # only content-bearing representations (no KEY_VALUE/REFERENCE)
    numbers_records: bool  # every record line carries a local ref (m1, m2, ...)
    supports_citations: bool  # config context_citations may add [m#] refs
    folds_repeated_text: bool  # config fold_repeated_text applies (RFC section 5)
    date_word: str  # how guidance names a record's date in this format
    labels_conflicts: bool  # records and metadata name conflict pairs c1, c2, ... not node ids
    elides_lone_times: bool  # a day's time line is printed only when its records differ in time
    # A run of record lines by one speaker follows one speaker line (run_speaker) instead of
    # each naming the speaker; a run of one record names it on its own line.
    speaker_lines: bool

    def header(self, *, speakers: bool, citations: bool) -> str: ...

    def section_label(self, section: Section, namespace: str | None) -> str: ...

    def record_line(self, view: RecordView) -> str: ...

    def shows_speaker(self, view: RecordView) -> bool: ...

    def date_lines(self, view: RecordView) -> tuple[str, ...]: ...

    def metadata_line(self, *, tokens_used: int, budget: int, conflicts: Sequence[object],
                      excluded_count: int) -> str: ...


class BaseFormat:
    """Defaults for a format: subclass it, set `name`, write header() and record_line()."""

    name = ""
    text_levels_only = False
    numbers_records = False
    supports_citations = False
    folds_repeated_text = False
    date_word = "event_time"
    labels_conflicts = False
    elides_lone_times = False
    speaker_lines = False

    def section_label(self, section: Section, namespace: str | None) -> str:
        return section_label(section, namespace)

    def shows_speaker(self, view: RecordView) -> bool:
        return False

    def date_lines(self, view: RecordView) -> tuple[str, ...]:
        """Lines that date this record and the records after it in its section, outermost
        first (e.g. a day line, then a time line). Formats that date each record inline
        return ()."""
        return ()

    def date_order(self, view: RecordView, dates: tuple[str, ...]) -> tuple[str, ...]:
        """The key that puts a section's dated records in date order: sorted by it, each of
        their date lines must form one run. The date lines themselves by default."""
        return dates

    def metadata_line(self, *, tokens_used: int, budget: int, conflicts: Sequence[object],
                      excluded_count: int) -> str:
        """The RFC section 6 metadata line; `conflicts` are id pairs, or pair labels when
        the format labels conflicts."""
        return metadata_line(tokens_used=tokens_used, budget=budget, conflicts=conflicts,
                             excluded_count=excluded_count)


def elides_times(fmt: object) -> bool:
    """Whether `fmt` prints a day's time line (the third of its date lines) only under a day
    whose records carry two or more times. The flag counts only when it was set with the
    date lines it applies to: a subclass that writes date lines of its own shape (where the
    third need not be a time) elides nothing unless it sets the flag itself."""
    if not getattr(fmt, "elides_lone_times", False):
        return False
    if "elides_lone_times" in getattr(fmt, "__dict__", {}):
        return True  # set on the object itself
    kind = type(fmt)
    elides = _CLASS_ELIDES.get(kind)
    if elides is None:  # per class: each pack asks it twice, and a GROUP BY packs thousands
        mro = kind.__mro__
        lines_owner = next((k for k in mro if "date_lines" in vars(k)), None)
        flag_owner = next(k for k in mro if "elides_lone_times" in vars(k))
        elides = _CLASS_ELIDES[kind] = lines_owner is None or issubclass(flag_owner,
                                                                          lines_owner)
    return elides


_CLASS_ELIDES: dict[type, bool] = {}


def section_label(section: Section, namespace: str | None) -> str:
    """'[facts]', or '[facts namespace "work"]' for a named namespace."""
    if namespace is None:
        return f"[{section.value}]"
    return f"[{section.value} namespace {json_text(namespace)}]"


# Every RecordView field but the candidate, for the render memo's key.
_view_fields = attrgetter(*(f.name for f in fields(RecordView) if f.name != "candidate"))

_MEMO_LIMIT = 16_384
# Memory a renderer's memo may hold: a remembered line keeps its view (with the candidate's
# text) alive too, so it is capped by bytes as well as entries; one huge record must not
# pin megabytes per pack for the life of the process (adversarial review M5).
_MEMO_BYTES = 32 * 1024 * 1024
_MEMOS: list[dict[Any, Any]] = []
_F = TypeVar("_F")

# The candidate fields no built-in renderer reads: the floats, which reach a line only
# through the view's text (a representation such as "confidence: 0.9"). The memos' keys
# leave them out, so the same node ranked with another score (an agent's next request, the
# other groups of a GROUP BY) finds its line remembered. tests/test_priced_memo.py holds
# every built-in format, the frozen ones too, to this.
UNSHOWN_FIELDS = frozenset({"score", "salience", "confidence"})
# A candidate's part of a memo key: its other fields, as one tuple.
shown_fields = attrgetter(*(name for name in Candidate.__slots__ if name not in UNSHOWN_FIELDS))


# The built-in format classes (builtin_format): only their lines are remembered.
_BUILTIN: set[type] = set()
_T = TypeVar("_T", bound=type)


def builtin_format(cls: _T) -> _T:
    """Mark a format class of this package: its instances all render alike, so memoized()
    may remember their lines."""
    _BUILTIN.add(cls)
    return cls


def is_builtin(fmt: object) -> bool:
    """Whether `fmt` is an instance of a built-in format class (not of a subclass)."""
    return type(fmt) in _BUILTIN


def memoized(render: Callable[[_F, RecordView], str]) -> Callable[[_F, RecordView], str]:
    """Remember a built-in renderer's line per view: packs re-render the same records.

    Views equal in every field but the candidate's floats render to equal lines for one
    built-in format class: a view holds every candidate field, and the built-in renderers
    read nothing else and no float (UNSHOWN_FIELDS). So a remembered line is the line the
    renderer would produce now. A registered subclass renders afresh: it may change what
    the renderer asks (shows_speaker, say), per class or per instance.
    """
    memo: dict[tuple, str] = {}
    held = [0]  # bytes the memo accounts for: about twice each line (line and view text)

    def record_line(self: _F, view: RecordView) -> str:
        cls = type(self)
        if cls not in _BUILTIN:
            return render(self, view)
        key = (cls, shown_fields(view.candidate), *_view_fields(view))
        try:
            line = memo.get(key)
        except TypeError:  # a hand-built Candidate with a list where a tuple belongs
            return render(self, view)
        if line is None:
            line = render(self, view)
            size = 2 * sys.getsizeof(line)
            if size > _MEMO_BYTES // 64:
                return line  # rendering it again costs less than keeping it
            if not memo:
                held[0] = 0  # cleared from outside (clear_render_memos)
            if len(memo) >= _MEMO_LIMIT or held[0] + size > _MEMO_BYTES:
                for stale in list(memo)[: max(len(memo) // 4, 1)]:  # the oldest quarter
                    old = memo.pop(stale, None)
                    if old is not None:
                        held[0] -= 2 * sys.getsizeof(old)
            memo[key] = line
            held[0] += size
        return line

    record_line.__doc__ = render.__doc__
    record_line.__wrapped__ = render  # type: ignore[attr-defined]
    _MEMOS.append(memo)
    return record_line


def register_memo(memo: dict[Any, Any]) -> dict[Any, Any]:
    """Add a renderer's own memo to those clear_render_memos() empties."""
    _MEMOS.append(memo)
    return memo


def clear_render_memos() -> None:
    """Forget every remembered line (the speed bench uses it to measure cold packs)."""
    for memo in _MEMOS:
        memo.clear()

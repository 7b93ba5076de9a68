"""The running layout of a context during packing: which record lines sit in which section,
and exactly how many tokens the context they would render to costs.

Costs are exact because each line's cost is exact and lines add (see tokens.py). The only
estimate is the metadata line, reserved at its widest numbers for the conflict pairs packed
so far; assembly replaces it exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..formats import Format, RecordView
from ..records import SECTION_ORDER, Candidate, Level, Section
from ..tokens.counter import LineCounter

_SECTION_RANK = {section: i for i, section in enumerate(SECTION_ORDER)}

GroupKey = tuple[tuple[int, str], int]


def group_key(namespace: str | None, section: Section) -> GroupKey:
    """Sort key: the unnamed namespace first, then namespaces by name; sections canonically."""
    ns = (0, "") if namespace is None else (1, namespace)
    return ns, _SECTION_RANK[section]


@dataclass(slots=True)
class Entry:
    """One packed record: its view, rendered line, exact line cost and placement."""

    view: RecordView
    line: str
    cost: int
    section: Section
    tier: int
    order: int
    speaker: bool
    dates: tuple[str, ...] = ()  # the format's day/time lines for this record, outermost first

    @property
    def candidate(self) -> Candidate:
        return self.view.candidate

    @property
    def level(self) -> Level:
        return self.view.level


@dataclass(slots=True)
class Layout:
    fmt: Format
    counter: LineCounter
    citations: bool
    metadata_cost: Callable[[frozenset[tuple[str, str]]], int]
    pairs: frozenset[tuple[str, str]] = frozenset()
    groups: dict[GroupKey, list[Entry]] = field(default_factory=dict)
    labels: dict[GroupKey, int] = field(default_factory=dict)
    # Per section: how many packed records each date-line prefix dates. With records in date
    # order, each distinct prefix is rendered once (see assemble.date_runs).
    dated: dict[GroupKey, dict[tuple[str, ...], int]] = field(default_factory=dict)
    speakers: int = 0
    records: int = 0
    used: int = 0

    def header_cost(self, speakers: bool) -> int:
        return self.counter.line_cost(self.fmt.header(speakers=speakers, citations=self.citations))

    def label_cost(self, key: GroupKey, section: Section, namespace: str | None) -> int:
        cost = self.labels.get(key)
        if cost is None:
            cost = self.counter.line_cost(self.fmt.section_label(section, namespace))
        return cost

    def delta(self, entry: Entry) -> int:
        """Exact tokens that adding `entry` adds to the context."""
        key = group_key(entry.candidate.namespace_id, entry.section)
        extra = entry.cost + self._metadata_delta(entry)
        if self.records == 0:
            extra += self.header_cost(entry.speaker)
        elif entry.speaker and self.speakers == 0:
            extra += self.header_cost(True) - self.header_cost(False)
        if key not in self.groups:
            extra += self.label_cost(key, entry.section, entry.candidate.namespace_id)
        if entry.dates:
            extra += self._dates_delta(self.dated.get(key, {}), entry.dates)
        return extra

    def _dates_delta(self, shown: dict[tuple[str, ...], int], dates: tuple[str, ...]) -> int:
        """Tokens of the date lines `dates` needs that no packed record has brought yet."""
        return sum(self.counter.line_cost(dates[i]) for i in range(len(dates))
                   if dates[: i + 1] not in shown)

    def add(self, entry: Entry, delta: int) -> None:
        key = group_key(entry.candidate.namespace_id, entry.section)
        if key not in self.groups:
            self.labels[key] = self.label_cost(key, entry.section, entry.candidate.namespace_id)
            self.groups[key] = []
        self.groups[key].append(entry)
        counts = self.dated.setdefault(key, {})
        for i in range(len(entry.dates)):
            prefix = entry.dates[: i + 1]
            counts[prefix] = counts.get(prefix, 0) + 1
        self.records += 1
        self.speakers += entry.speaker
        pairs = _pairs_of(entry)
        if pairs:
            self.pairs = self.pairs | pairs
        self.used += delta

    def remove(self, entry: Entry) -> None:
        """Take a packed entry out again and recompute the cost from scratch."""
        key = group_key(entry.candidate.namespace_id, entry.section)
        self.groups[key].remove(entry)
        counts = self.dated.get(key, {})
        for i in range(len(entry.dates)):
            prefix = entry.dates[: i + 1]
            counts[prefix] -= 1
            if not counts[prefix]:
                del counts[prefix]
        if not self.groups[key]:
            del self.groups[key]
            del self.labels[key]
            self.dated.pop(key, None)
        self.records -= 1
        self.speakers -= entry.speaker
        self.pairs = frozenset(p for es in self.groups.values() for e in es for p in _pairs_of(e))
        self.used = self.recount()

    def recount(self) -> int:
        if self.records == 0:
            return 0
        lines = sum(e.cost for entries in self.groups.values() for e in entries)
        dates = sum(self.counter.line_cost(prefix[-1])
                    for counts in self.dated.values() for prefix in counts)
        return (self.header_cost(self.speakers > 0) + self.metadata_cost(self.pairs)
                + sum(self.labels.values()) + lines + dates)

    def _metadata_delta(self, entry: Entry) -> int:
        new = _pairs_of(entry)
        if self.records and new <= self.pairs:
            return 0
        before = self.metadata_cost(self.pairs) if self.records else 0
        return self.metadata_cost(self.pairs | new) - before

    def clear(self) -> None:
        self.groups.clear()
        self.labels.clear()
        self.dated.clear()
        self.records = self.speakers = self.used = 0
        self.pairs = frozenset()

    def ordered(self) -> list[tuple[GroupKey, list[Entry]]]:
        return sorted(self.groups.items(), key=lambda item: item[0])


def _pairs_of(entry: Entry) -> frozenset[tuple[str, str]]:
    if not entry.view.contradicts:
        return _NO_PAIRS  # the common case: no set built
    own = entry.candidate.id
    return frozenset((min(own, o), max(own, o)) for o in entry.view.contradicts)


_NO_PAIRS: frozenset[tuple[str, str]] = frozenset()


def dated(fmt: Format, view: RecordView) -> tuple[str, ...]:
    """The format's date lines for a view; () for formats that date records inline."""
    date_lines = getattr(fmt, "date_lines", None)
    return tuple(date_lines(view)) if date_lines is not None else ()

"""The running layout of a context during packing: which record lines sit in which section,
and exactly how many tokens the context they would render to costs.

Costs are exact because each line's cost is exact and lines add (see tokens.py). The only
estimate is the metadata line, reserved at its widest numbers for the conflict pairs packed
so far (metacost.py); assembly replaces it exactly.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable
from dataclasses import dataclass, field

from ..formats import Format, RecordView
from ..formats.base import elides_times, is_builtin
from ..records import SECTION_ORDER, Candidate, Level, Section
from ..tokens.counter import LineCounter
from .compat import FIXED_RUNS_VERSION, replaying_before
from .metacost import MetadataCost

_SECTION_RANK = {section: i for i, section in enumerate(SECTION_ORDER)}
# The time line's place in a record's date lines: (year, day, time); those before it
# name the day.
_TIME = 2

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
    # The speaker line naming a run of this record's speaker (formats with speaker_lines);
    # None when its line names no speaker or names it itself.
    run: str | None = None
    seat: int = 0  # when the layout took it in: ties in date order keep that order
    inline: int = -1  # tokens its speaker adds on its own line (a run of one); -1: not yet
    alone: str | None = None  # its line naming its speaker itself (a run of one), once asked
    key: tuple | None = None  # its place in print order (run_sort_key), once asked

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
    # The packed records' conflict pairs (kept as records come and go) and the cost of the
    # metadata line listing them.
    metadata: MetadataCost
    groups: dict[GroupKey, list[Entry]] = field(default_factory=dict)
    labels: dict[GroupKey, int] = field(default_factory=dict)
    # Per section: how many packed records each date-line prefix dates. With records in date
    # order, each distinct prefix is rendered once (see assemble.date_runs).
    dated: dict[GroupKey, dict[tuple[str, ...], int]] = field(default_factory=dict)
    # Per section and day, its distinct time lines (formats that elide a lone time line:
    # a day prints its times only when it has two or more).
    times: dict[GroupKey, dict[tuple[str, ...], list[str]]] = field(default_factory=dict)
    speakers: int = 0
    records: int = 0
    used: int = 0
    elide: bool = field(init=False)  # the format leaves out a lone time line (elides_times)
    # Kept as records come and go, so taking one out costs no pass over the others (the
    # section 7 ladder takes out and puts back every pin and task): the tokens of all
    # record lines and shown date lines.
    line_tokens: int = field(init=False, default=0)
    date_tokens: int = field(init=False, default=0)
    # Formats with speaker lines: each section's entries in the order assembly prints them
    # (sort keys and entries side by side), and the tokens of the speaker lines, inline
    # speakers and '(no speaker)' lines those runs print.
    runs: bool = field(init=False)
    # Formats with speaker lines also print the last date line above a record on its first
    # line ('3 Jan Maya:'), where it costs its line break and often a token of the name.
    merges: bool = field(init=False)
    plain_runs: bool = field(init=False)  # the built-in reader's runs (see alone_line)
    shown_runs: bool = field(init=False)  # runs follow the printed date lines (_same_run)
    seq: dict[GroupKey, tuple[list[tuple], list[Entry]]] = field(init=False,
                                                                  default_factory=dict)
    speaker_tokens: int = field(init=False, default=0)
    seats: int = field(init=False, default=0)
    # The last entry delta() priced, after how many changes to the layout, with its group
    # key and the tokens of its new date lines and of its runs; add() takes them when
    # nothing changed since.
    _priced: tuple | None = field(init=False, default=None)
    _changes: int = field(init=False, default=0)
    _keys: dict[tuple[str, Level], tuple] = field(init=False, default_factory=dict)
    _order: Callable[..., tuple] | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.elide = elides_times(self.fmt)
        self.runs = bool(getattr(self.fmt, "speaker_lines", False))
        self.merges = self.runs
        self.plain_runs = self.runs and is_builtin(self.fmt)
        self.shown_runs = runs_by_shown()
        self._order = getattr(self.fmt, "date_order", None)

    @property
    def pairs(self) -> frozenset[tuple[str, str]]:
        """The conflict pairs of the packed records."""
        return frozenset(self.metadata.pairs)

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
        dates = self._dates_delta(key, entry.dates) if entry.dates else 0
        runs = self._runs_delta(key, entry, self.seats) if self.runs else 0
        self._priced = (entry, self._changes, key, dates, runs)
        return extra + dates + runs

    def _dates_delta(self, key: GroupKey, dates: tuple[str, ...]) -> int:
        """Tokens of the date lines `dates` needs that no packed record has brought yet."""
        shown = self.dated.get(key, {})
        cost = self.counter.line_cost
        extra = 0
        for i in range(len(dates)):
            if dates[: i + 1] in shown:
                continue
            if i == _TIME and self.elide:
                others = self.times.get(key, {}).get(dates[:_TIME], ())
                if not others:
                    continue  # the day's only time: not printed
                if len(others) == 1:
                    extra += cost(others[0])  # the day's first time is printed from now on
            extra += cost(dates[i])
        return extra

    def add(self, entry: Entry, delta: int) -> None:
        priced = self._priced
        self._priced = None
        self._changes += 1
        if priced is not None and priced[0] is entry and priced[1] == self._changes - 1:
            # delta() priced this entry just now, as it is added after, in most calls.
            _, _, key, dates, runs = priced
        else:
            key = group_key(entry.candidate.namespace_id, entry.section)
            dates = self._dates_delta(key, entry.dates) if entry.dates else 0
            runs = self._runs_delta(key, entry, self.seats) if self.runs else 0
        self.date_tokens += dates
        if self.runs:
            self.speaker_tokens += runs
            entry.seat = self.seats
            self.seats += 1
            keys, entries = self.seq.setdefault(key, ([], []))
            sort_key = (*self._print_key(entry), entry.seat)
            i = bisect_left(keys, sort_key)
            keys.insert(i, sort_key)
            entries.insert(i, entry)
        self.line_tokens += entry.cost
        if key not in self.groups:
            self.labels[key] = self.label_cost(key, entry.section, entry.candidate.namespace_id)
            self.groups[key] = []
        self.groups[key].append(entry)
        counts = self.dated.setdefault(key, {})
        for i in range(len(entry.dates)):
            prefix = entry.dates[: i + 1]
            counts[prefix] = counts.get(prefix, 0) + 1
            if i == _TIME and counts[prefix] == 1:
                self.times.setdefault(key, {}).setdefault(prefix[:_TIME], []).append(prefix[i])
        self.records += 1
        self.speakers += entry.speaker
        pairs = _pairs_of(entry)
        if pairs:
            self.metadata.add(pairs)
        self.used += delta

    def remove(self, entry: Entry) -> None:
        """Take a packed entry out again and recompute the cost from the running totals."""
        key = group_key(entry.candidate.namespace_id, entry.section)
        self._changes += 1
        if self.runs:
            self._leave_run(key, entry)
        group = self.groups[key]
        # By identity (no two packed entries are equal: each has its own order), not by
        # the dataclass's field-by-field __eq__ on every entry before it.
        del group[next(i for i, e in enumerate(group) if e is entry)]
        counts = self.dated.get(key, {})
        for i in range(len(entry.dates)):
            prefix = entry.dates[: i + 1]
            counts[prefix] -= 1
            if not counts[prefix]:
                del counts[prefix]
                if i == _TIME:
                    day = self.times[key][prefix[:_TIME]]
                    day.remove(prefix[i])
                    if not day:
                        del self.times[key][prefix[:_TIME]]
        if not self.groups[key]:
            del self.groups[key]
            del self.labels[key]
            self.dated.pop(key, None)
            self.times.pop(key, None)
        self.records -= 1
        self.speakers -= entry.speaker
        self.line_tokens -= entry.cost
        if entry.dates:
            # Putting the entry back would bring exactly the date lines it took away.
            self.date_tokens -= self._dates_delta(key, entry.dates)
        pairs = _pairs_of(entry)
        if pairs:
            self.metadata.remove(pairs)
        self.used = self.recount()

    def recount(self) -> int:
        if self.records == 0:
            return 0
        return (self.header_cost(self.speakers > 0) + self.metadata.cost()
                + sum(self.labels.values()) + self.line_tokens + self.date_tokens
                + self.speaker_tokens)

    # -- speaker runs (formats with speaker_lines) ----------------------------------------

    def _runs_delta(self, key: GroupKey, entry: Entry, seat: int) -> int:
        """Tokens the lines around `entry` gain when it joins its section at its place in
        print order: its own speaker, the runs of its neighbours it joins, splits or opens,
        and the date line it or a neighbour now opens with."""
        keys, entries = self.seq.get(key, _EMPTY_SEQ)
        i = bisect_left(keys, (*self._print_key(entry), seat))
        day = self._flips_when_added(key, entry)
        if day is not None:  # its day's time lines appear: every line of that day may change
            a, b = self._day_span(entries, i, day)
            after = entries[a:i] + [entry] + entries[i:b]
            return (self._span_extra(after, entries[a - 1] if a else None,
                                     entries[b] if b < len(entries) else None,
                                     self._shown_with(key, day, 2))
                    - self._span_extra(entries[a:b], entries[a - 1] if a else None,
                                       entries[b] if b < len(entries) else None,
                                       self._shown_with(key, day, None)))
        return self._joining(entries, i, i, entry, self._shown_with(key, None, None))

    def _joining(self, entries: list[Entry], i: int, j: int, entry: Entry,
                 shown: Callable[[Entry], tuple[str, ...]]) -> int:
        """Tokens `entry` brings between entries[i - 1] and entries[j] (j is i when it is
        not among them yet, i + 1 when it is entries[i]): its own, and its neighbours'."""
        prev = entries[i - 1] if i else None
        before = entries[i - 2] if i > 1 else None
        nxt = entries[j] if j < len(entries) else None
        after = entries[j + 1] if j + 1 < len(entries) else None
        extra = self.line_extra(prev, entry, nxt, shown)
        run_shown = shown if self.shown_runs else None
        # A neighbour's lines change only where what it reads of the entry beside it does.
        if prev is not None and _same_run(prev, entry, run_shown) != _same_run(prev, nxt,
                                                                                run_shown):
            extra += (self.line_extra(before, prev, entry, shown)
                      - self.line_extra(before, prev, nxt, shown))
        if nxt is not None:
            seen = shown(nxt)
            if _after(prev, nxt, seen, shown, run_shown) != _after(entry, nxt, seen, shown,
                                                                   run_shown):
                extra += (self.line_extra(entry, nxt, after, shown)
                          - self.line_extra(prev, nxt, after, shown))
        return extra

    def _print_key(self, entry: Entry) -> tuple:
        if entry.key is None:
            # Per record and level: packing tries the same records again and again.
            known = (entry.candidate.id, entry.view.level)
            key = self._keys.get(known)
            if key is None:
                key = self._keys[known] = run_sort_key(entry, self._order)
            entry.key = key
        return entry.key

    def _leave_run(self, key: GroupKey, entry: Entry) -> None:
        keys, entries = self.seq[key]
        i = bisect_left(keys, (*self._print_key(entry), entry.seat))  # seats are unique
        assert entries[i] is entry
        day = self._flips_when_removed(key, entry)
        if day is not None:  # its day's time lines go: every line of that day may change
            a, b = self._day_span(entries, i, day)
            outer = (entries[a - 1] if a else None, entries[b] if b < len(entries) else None)
            change = (self._span_extra(entries[a:i] + entries[i + 1:b], *outer,
                                       self._shown_with(key, day, 1))
                      - self._span_extra(entries[a:b], *outer, self._shown_with(key, None, None)))
        else:  # taking it out undoes what putting it there brought
            change = -self._joining(entries, i, i + 1, entry, self._shown_with(key, None, None))
        self.speaker_tokens += change
        del keys[i]
        del entries[i]
        if not entries:
            del self.seq[key]

    # A day's time lines are printed only while its records carry two or more times
    # (elides_lone_times); the entry that brings the second time, or takes it away, turns
    # them on or off for the whole day, so its day is priced again as a whole.

    def _flips_when_added(self, key: GroupKey, entry: Entry) -> tuple[str, ...] | None:
        dates = entry.dates
        if not (self.merges and self.elide and len(dates) > _TIME):
            return None
        times = self.times.get(key, {}).get(dates[:_TIME], ())
        return dates[:_TIME] if len(times) == 1 and dates[_TIME] not in times else None

    def _flips_when_removed(self, key: GroupKey, entry: Entry) -> tuple[str, ...] | None:
        dates = entry.dates
        if not (self.merges and self.elide and len(dates) > _TIME):
            return None
        times = self.times.get(key, {}).get(dates[:_TIME], ())
        alone = self.dated.get(key, {}).get(dates[: _TIME + 1], 0) == 1
        return dates[:_TIME] if len(times) == 2 and alone else None

    @staticmethod
    def _day_span(entries: list[Entry], i: int, day: tuple[str, ...]) -> tuple[int, int]:
        """The slice of `entries` (in print order) that holds `day`'s records around i."""
        a = i
        while a and entries[a - 1].dates[:_TIME] == day:
            a -= 1
        b = i
        while b < len(entries) and entries[b].dates[:_TIME] == day:
            b += 1
        return a, b

    def _shown_with(self, key: GroupKey, day: tuple[str, ...] | None,
                    count: int | None) -> Callable[[Entry], tuple[str, ...]]:
        """The date lines each entry prints (shown_dates), with `day` holding `count`
        distinct times instead of the times it holds now."""
        times = self.times.get(key, {})
        elide = self.elide

        def shown(entry: Entry) -> tuple[str, ...]:
            dates = entry.dates
            if elide and len(dates) > _TIME:
                n = count if count is not None and dates[:_TIME] == day else len(
                    times.get(dates[:_TIME], ()))
                if n < 2:
                    return dates[:_TIME]
            return dates
        return shown

    def _span_extra(self, span: list[Entry], outer_prev: Entry | None,
                    outer_next: Entry | None, shown: Callable[[Entry], tuple[str, ...]]) -> int:
        total = 0
        for j, entry in enumerate(span):
            prev = span[j - 1] if j else outer_prev
            nxt = span[j + 1] if j + 1 < len(span) else outer_next
            total += self.line_extra(prev, entry, nxt, shown)
        return total

    def line_extra(self, prev: Entry | None, entry: Entry, nxt: Entry | None,
                   shown: Callable[[Entry], tuple[str, ...]]) -> int:
        """Tokens beyond its own line that `entry` brings between `prev` and `nxt`: its
        run's (_role_extra), less what printing the last date line above it on its first
        line saves (formats with speaker lines: '3 Jan Maya:' for '3 Jan' and 'Maya:')."""
        # Asked once: both parts read it.
        role = run_role(prev, entry, nxt, shown if self.shown_runs else None)
        extra = self._role_extra(role, entry)
        if not self.merges:
            return extra
        dates = shown(entry)
        if not dates or (prev is not None and shown(prev) == dates):
            return extra
        last = dates[-1]  # the last date line printed above it (assemble.date_run)
        first, cost = self._first_line(role, entry, extra)
        return extra + merge_saving(self.counter, last, first, cost)

    def _first_line(self, role: str, entry: Entry, extra: int) -> tuple[str, int]:
        """The first line `entry` prints in `role` (see run_role) and its tokens, given the
        tokens `extra` its run adds (_role_extra)."""
        if role == "bare":
            return entry.line, entry.cost
        if role == "alone":
            return self.alone_line(entry), entry.cost + extra
        if role == "opens":
            return entry.run or "", extra  # a run opens only where there is one
        return NO_SPEAKER_LINE, extra  # "apart"

    def alone_line(self, entry: Entry) -> str:
        if entry.alone is None:
            # The built-in reader's line naming its speaker is the run's speaker line and
            # the run's record line, joined (a run has no ref, tags or window to come first).
            entry.alone = (entry.run + entry.line if self.plain_runs and entry.run is not None
                           else inline_line(self.fmt, entry.view))
        return entry.alone

    def _role_extra(self, role: str, entry: Entry) -> int:
        """Tokens beyond its own line that `entry` brings in `role` (see run_role): a
        '(no speaker)' line, the speaker line opening its run, or its speaker on its own
        line."""
        if role == "bare":
            return 0
        if role == "alone":
            if entry.inline < 0:
                alone, run = self.alone_line(entry), entry.run
                assert run is not None
                if alone == run + entry.line:  # 'Maya:' + '"text"', the reader's own line
                    cost = self.counter.joined_cost(run[:-1], entry.line, ":", entry.cost)
                else:
                    cost = self.counter.line_cost(alone)
                entry.inline = cost - entry.cost
            return entry.inline
        if role == "opens":
            return self.counter.line_cost(entry.run or "")
        return self.counter.line_cost(NO_SPEAKER_LINE)  # "apart"

    def _metadata_delta(self, entry: Entry) -> int:
        new = _pairs_of(entry)
        if self.records and self.metadata.pairs.keys() >= new:  # no new pair: same line
            return 0
        before = self.metadata.cost() if self.records else 0
        return self.metadata.cost(new) - before

    def clear(self) -> None:
        self.groups.clear()
        self.labels.clear()
        self.dated.clear()
        self.times.clear()
        self.records = self.speakers = self.used = 0
        self.line_tokens = self.date_tokens = self.speaker_tokens = 0
        self.seq.clear()
        self._changes += 1
        self.metadata.clear()

    def ordered(self) -> list[tuple[GroupKey, list[Entry]]]:
        return sorted(self.groups.items(), key=lambda item: item[0])


def _pairs_of(entry: Entry) -> frozenset[tuple[str, str]]:
    if not entry.view.contradicts:
        return _NO_PAIRS  # the common case: no set built
    own = entry.candidate.id
    return frozenset((min(own, o), max(own, o)) for o in entry.view.contradicts)


_NO_PAIRS: frozenset[tuple[str, str]] = frozenset()
_EMPTY_SEQ: tuple[list[tuple], list[Entry]] = ([], [])
# Sets a record that names no speaker apart from the speaker named above it that day.
NO_SPEAKER_LINE = "(no speaker)"


def run_role(prev: Entry | None, entry: Entry, nxt: Entry | None,
             shown: Shown | None = None) -> str:
    """How `entry` prints between `prev` and `nxt` in a format with speaker lines:
    "apart" after a '(no speaker)' line (it names no speaker and follows one naming a
    speaker on the same day, where a bare line would read as part of a run; also where a
    time line comes between, so that what is printed does not hang on the day's other
    records), "opens" after the speaker line of the run of two or more it opens, "alone"
    naming its speaker itself (a run of one), or "bare" as its line is (inside a run, or
    naming no speaker). `shown` gives each entry's date lines as printed (runs_by_shown)."""
    if entry.run is None:
        return "apart" if not entry.speaker and _names_on_day(prev, entry) else "bare"
    if _same_run(prev, entry, shown):
        return "bare"
    return "opens" if _same_run(entry, nxt, shown) else "alone"


Shown = Callable[[Entry], tuple[str, ...]]


def _same_run(entry: Entry | None, nxt: Entry | None, shown: Shown | None) -> bool:
    """Whether `nxt` goes on the run `entry` is in: all line_extra reads of the next entry.
    A run is one speaker's records under the same printed date lines (`shown`); without
    `shown`, under the same date lines before a lone time line is left out, as receipts
    before version 9 printed it: a midnight record (no time line) and one at 09:30 on a
    day with no other time then opened two runs with no line between them."""
    if entry is None or nxt is None or entry.run is None or nxt.run != entry.run:
        return False
    return nxt.dates == entry.dates or shown is not None and shown(nxt) == shown(entry)


def runs_by_shown() -> bool:
    """Runs follow the printed date lines (receipt version 9 on), not replays of older."""
    return not replaying_before(FIXED_RUNS_VERSION)


def _names_on_day(prev: Entry | None, entry: Entry) -> bool:
    """Whether `prev` names a speaker on `entry`'s day (a record naming none after it is
    set apart)."""
    return prev is not None and prev.speaker and prev.dates[:_TIME] == entry.dates[:_TIME]


def _after(prev: Entry | None, entry: Entry, seen: tuple[str, ...], shown: Shown,
           run_shown: Shown | None) -> tuple[bool, bool, bool]:
    """All that line_extra reads of the entry before `entry` (which prints date lines
    `seen`): whether it opens the run `entry` goes on, whether it names a speaker on the
    same day, whether it prints the same date lines."""
    if prev is None:
        return False, False, not seen
    return (_same_run(prev, entry, run_shown), _names_on_day(prev, entry),
            shown(prev) == seen)


def date_sort_key(entry: Entry, order: Callable[..., tuple] | None) -> tuple:
    """Where `entry` goes in its section's date order: undated first, then by the format's
    date_order (its date lines, if it has none), session and place in the session."""
    return _date_key(entry.view, entry.dates, order)


def _date_key(view: RecordView, dates: tuple[str, ...],
              order: Callable[..., tuple] | None) -> tuple:
    c = view.candidate
    position = c.session_position if c.session_position is not None else -1
    if not dates:
        key: tuple = ()  # undated records first; a format's date_order sees dated ones only
    else:
        key = dates if order is None else order(view, dates)
    return key, c.session_id or "", position


_UNDATED = ((), "", -1)


def run_sort_key(entry: Entry, order: Callable[..., tuple] | None) -> tuple:
    """date_sort_key for formats with speaker lines, which print every section in it: the
    undated records first in the order they were packed (ties keep it), as a section with
    no dated record always was."""
    return print_key(entry.view, entry.dates, order)


def print_key(view: RecordView, dates: tuple[str, ...],
              order: Callable[..., tuple] | None) -> tuple:
    """run_sort_key of a record shown as `view` with date lines `dates`, before it has an
    entry (Selector.priced remembers it with the line)."""
    return _date_key(view, dates, order) if dates else _UNDATED


def merge_saving(counter: LineCounter, last: str, first: str, cost: int | None = None) -> int:
    """Tokens (<= 0) that printing date line `last` at the start of line `first` saves,
    where it saves any: the line break, and often a token of the speaker's name (' Maya'
    where a line starts 'May', 'a'). A line opening with '[m1]' can cost more that way,
    and then keeps its own line."""
    cost_of = counter.line_cost
    own = cost_of(first) if cost is None else cost
    return min(counter.joined_cost(last, first, " ", own) - cost_of(last) - own, 0)


def speaker_run(fmt: Format, view: RecordView) -> str | None:
    """The speaker line naming the run `view`'s record belongs to, for formats that have
    speaker lines; None otherwise."""
    if not getattr(fmt, "speaker_lines", False):
        return None
    return fmt.run_speaker(view)  # type: ignore[attr-defined]


def inline_line(fmt: Format, view: RecordView) -> str:
    """The record's line naming its own speaker: how a run of one record is printed."""
    return fmt.record_line(speaker_on_line(view))


def speaker_on_line(view: RecordView) -> RecordView:
    """`view` with its speaker printed on its own line (dataclasses.replace, at a fraction
    of its cost: assembly asks it of every run of one)."""
    return RecordView(view.candidate, view.level, view.text, view.ref, view.contradicts,
                      view.conflict_labels, False)


def shown_dates(fmt: Format, group: list[Entry]) -> list[tuple[str, ...]]:
    """Each entry's date lines as printed: without its time line when the format elides a
    lone time and no other record of that day in `group` has a different time."""
    if not elides_times(fmt):
        return [entry.dates for entry in group]
    times: dict[tuple[str, ...], set[str]] = {}
    for entry in group:
        if len(entry.dates) > _TIME:
            times.setdefault(entry.dates[:_TIME], set()).add(entry.dates[_TIME])
    return [entry.dates[:_TIME] if len(entry.dates) > _TIME
            and len(times[entry.dates[:_TIME]]) < 2 else entry.dates for entry in group]


def dated(fmt: Format, view: RecordView) -> tuple[str, ...]:
    """The format's date lines for a view; () for formats that date records inline."""
    date_lines = getattr(fmt, "date_lines", None)
    return tuple(date_lines(view)) if date_lines is not None else ()

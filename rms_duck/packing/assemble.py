"""Turn a finished layout into the exact context text and its verified token count.

Puts each section's records in date order (formats with date lines), states each day and
time once, numbers citations and conflict pair labels over the packed records in render
order, renders the metadata line
with a self-consistent tokens_used, and adds guidance only if the whole output still fits.
The per-line sum is the count where the encoding's pattern proves it; elsewhere the whole
output is counted once to confirm it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..formats.base import RecordView
from ..formats.metadata import solve_tokens_used
from ..formats.reader import UNDATED_LINE
from .compat import version3
from .layout import (
    NO_SPEAKER_LINE,
    Entry,
    Layout,
    date_sort_key,
    merge_saving,
    run_role,
    shown_dates,
    speaker_on_line,
)


@dataclass(frozen=True, slots=True)
class Assembly:
    context: str
    tokens_used: int
    entries: tuple[Entry, ...]
    references: dict[str, str]
    guidance: str | None


def assemble(layout: Layout, *, budget: int, available: int, conflicts: list[list[str]],
             excluded_count: int, numbered: bool, guidance: str | None,
             arrange: Callable[[list[Entry]], list[Entry]] | None = None) -> Assembly | None:
    """The rendered context, or None when the exact output would exceed `available`."""
    if layout.records == 0:
        return Assembly("", 0, (), {}, None)
    counter, fmt = layout.counter, layout.fmt
    labelled = getattr(fmt, "labels_conflicts", False)
    groups = []
    legacy = version3()
    for key, group in layout.ordered():
        if arrange is not None and legacy:
            group = arrange(group)  # receipts of version 3 kept packing order around windows
        elif layout.runs:
            # The layout keeps each section in print order: sorted by run_sort_key, ties
            # in the order the records came in (their seats), as a stable sort leaves them.
            group = list(layout.seq[key][1])
        elif any(entry.dates for entry in group):
            order = getattr(fmt, "date_order", None)  # formats without it: the lines
            group = sorted(group, key=lambda e: date_sort_key(e, order))  # stable
        if arrange is not None and not legacy:
            # Date order first, then each session window gathered at its first member.
            group = arrange(group)
        groups.append(group)
    pair_labels = _pair_labels(groups) if labelled else {}
    entries: list[Entry] = []
    body: list[str] = []
    references: dict[str, str] = {}  # citation ref -> candidate id, when numbered
    for group in groups:
        first = group[0]
        body.append(fmt.section_label(first.section, first.candidate.namespace_id))
        shown: tuple[str, ...] = ()
        printed = shown_dates(fmt, group)
        run_shown = _printed_of(group, printed) if layout.shown_runs else None
        for i, (entry, dates) in enumerate(zip(group, printed, strict=True)):
            ref = f"m{len(entries) + 1}" if numbered else entry.view.ref
            view = entry.view
            labels = tuple(pair_labels[_pair(view.candidate.id, other)]
                           for other in view.contradicts) if labelled and view.contradicts else ()
            prev = group[i - 1] if i else None
            role = run_role(prev, entry, group[i + 1] if i + 1 < len(group) else None,
                            run_shown) if layout.runs else ""
            if view.ref != ref or view.conflict_labels != labels:
                entry = _rerender(entry, ref, labels, layout)
            if numbered and ref is not None:
                references[ref] = entry.candidate.id
            above = date_run(shown, dates)
            if dates or shown:
                shown = dates
            if layout.runs:
                lines, alone = _speaker_lines(layout, role, entry)
                if alone:  # a run of one: its line names the speaker
                    entry = _with_line(entry, speaker_on_line(entry.view), lines[-1],
                                       counter.line_cost(lines[-1]))
                if layout.merges and above and above[-1] != UNDATED_LINE \
                        and merge_saving(counter, above[-1], lines[0]) < 0:
                    # The last date line opens the first line below it: '3 Jan Maya:'.
                    lines[0] = f"{above.pop()} {lines[0]}"
                body.extend(above)
                body.extend(lines)
            else:
                body.extend(above)
                body.append(entry.line)
            entries.append(entry)
    header = fmt.header(speakers=layout.speakers > 0, citations=layout.citations)
    rest = counter.line_cost(header) + sum(map(counter.line_cost, body))
    labels_shown: list[str] = sorted(set(pair_labels.values()), key=_label_number)
    shown_conflicts: list[object] = list(labels_shown) if labelled else list(conflicts)

    def meta(n: int) -> str:
        return fmt.metadata_line(tokens_used=n, budget=budget, conflicts=shown_conflicts,
                                 excluded_count=excluded_count)

    def meta_cost(n: int) -> int:
        return counter.line_cost(meta(n))

    shown_guidance = None
    total = solve_tokens_used(rest, meta_cost)
    if guidance is not None:
        with_guidance = solve_tokens_used(rest + counter.line_cost(guidance), meta_cost)
        if with_guidance is not None and with_guidance <= available:
            shown_guidance, total = guidance, with_guidance
    if total is None or total > available:
        return None
    lines = ([shown_guidance] if shown_guidance else []) + [header] + body + [meta(total)]
    context = "\n".join(lines) + "\n"  # every line ends in one
    # The sum of the lines output (a format may render its metadata differently on a second
    # call) is the count when the pattern proves it (LineCounter.sums_exactly); otherwise the
    # whole output is counted, and the count wins.
    actual = sum(map(counter.line_cost, lines))  # first: a loaded cost it used is then known
    if not counter.sums_exactly(lines):
        actual = counter.count(context)
    if actual != total:
        # The per-line sum and the whole count disagree (a wrong loaded cost, or a tokenizer
        # without line additivity, see tokens/hf.py); trust only the whole count, and say so.
        counter.mismatches += 1
        settled = _settle(context, lines, meta, counter.count)
        if settled is None:
            return None  # no self-consistent metadata line: drop a record and try again
        context, total = settled
        if total > available:
            return None
    return Assembly(context, total, tuple(entries), references, shown_guidance)


def date_run(shown: tuple[str, ...], dates: tuple[str, ...]) -> list[str]:
    """The date lines to print before a record dated `dates` when `shown` dates the lines
    above it: those past the shared prefix. A record with fewer date lines than are shown
    (only when records are not in date order) restates its day, or says it is undated."""
    common = 0
    while common < min(len(shown), len(dates)) and shown[common] == dates[common]:
        common += 1
    if common < len(dates):
        return list(dates[common:])
    if len(dates) < len(shown):
        return [dates[-1]] if dates else [UNDATED_LINE]
    return []


def _printed_of(group: list[Entry],
                printed: list[tuple[str, ...]]) -> Callable[[Entry], tuple[str, ...]]:
    """Each entry of `group` -> the date lines it prints (runs follow them: run_role)."""
    at = {id(e): i for i, e in enumerate(group)}
    return lambda entry: printed[at[id(entry)]]


def _speaker_lines(layout: Layout, role: str, entry: Entry) -> tuple[list[str], bool]:
    """`entry`'s lines in the `role` run_role gave it (as Layout.line_extra prices it), and
    whether its line names its speaker itself."""
    if role == "apart":
        return [NO_SPEAKER_LINE, entry.line], False
    if role == "opens":
        return [entry.run or "", entry.line], False
    if role == "alone":
        return [layout.alone_line(entry)], True
    return [entry.line], False


def _pair(a: str, b: str) -> tuple[str, str]:
    return (a, b) if a <= b else (b, a)


def _pair_labels(groups: list[list[Entry]]) -> dict[tuple[str, str], str]:
    """c1, c2, ... for the CONTRADICTS pairs, numbered in the order the context shows them
    (`groups`: the sections' entries in print order)."""
    labels: dict[tuple[str, str], str] = {}
    for group in groups:
        for entry in group:
            for other in entry.view.contradicts:
                pair = _pair(entry.view.candidate.id, other)
                if pair not in labels:
                    labels[pair] = f"c{len(labels) + 1}"
    return labels


def _label_number(label: str) -> int:
    return int(label[1:])


def _rerender(entry: Entry, ref: str | None, labels: tuple[str, ...], layout: Layout) -> Entry:
    """`entry` printed with citation `ref` and conflict pair `labels` (which it lacks)."""
    v = entry.view
    view = RecordView(v.candidate, v.level, v.text, ref, v.contradicts, labels, v.speaker_above)
    line = layout.fmt.record_line(view)
    return _with_line(entry, view, line, layout.counter.line_cost(line))


def _with_line(entry: Entry, view: RecordView, line: str, cost: int) -> Entry:
    """`entry` printed as `line` from `view` (dataclasses.replace, at a fraction of its
    cost); the run and print caches do not go along: assembly is done with them."""
    return Entry(view, line, cost, entry.section, entry.tier, entry.order, entry.speaker,
                 entry.dates, entry.run, entry.seat)


def _settle(context, lines, meta, count) -> tuple[str, int] | None:
    """Re-render the metadata with whole-output counts until it states its own count
    (None if it never does)."""
    n = count(context)
    for _ in range(16):
        lines[-1] = meta(n)
        context = "".join(line + "\n" for line in lines)
        actual = count(context)
        if actual == n:
            return context, n
        n = actual
    return None

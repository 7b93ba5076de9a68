"""Turn a finished layout into the exact context text and its verified token count.

Numbers the citations over the packed records in render order, renders the metadata line
with a self-consistent tokens_used, adds guidance only if the whole output still fits, and
counts the whole output once to confirm the per-line sum.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..formats.metadata import metadata_line, solve_tokens_used
from .layout import Entry, Layout


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
    entries: list[Entry] = []
    body: list[str] = []
    references: dict[str, str] = {}  # citation ref -> candidate id, when numbered
    for _key, group in layout.ordered():
        if arrange is not None:
            group = arrange(group)
        first = group[0]
        body.append(fmt.section_label(first.section, first.candidate.namespace_id))
        for entry in group:
            if numbered:
                ref = f"m{len(entries) + 1}"
                entry = _renumber(entry, ref, layout)
                references[ref] = entry.candidate.id
            entries.append(entry)
            body.append(entry.line)
    header = fmt.header(speakers=layout.speakers > 0, citations=layout.citations)
    rest = counter.line_cost(header) + sum(counter.line_cost(line) for line in body)

    def meta(n: int) -> str:
        return metadata_line(tokens_used=n, budget=budget, conflicts=conflicts,
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
    context = "".join(line + "\n" for line in lines)
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


def _renumber(entry: Entry, ref: str, layout: Layout) -> Entry:
    if entry.view.ref == ref:
        return entry
    view = replace(entry.view, ref=ref)
    line = layout.fmt.record_line(view)
    return replace(entry, view=view, line=line, cost=layout.counter.line_cost(line))


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

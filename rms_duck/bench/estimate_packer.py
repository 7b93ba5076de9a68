"""The estimate-packer baseline: what packing costs when nobody tokenizes.

A greedy packer in the style of the reference implementation's estimate mode: every line
costs ceil(characters / 4.2) tokens, candidates are tried in score order (-score, id), each
one that still fits by the estimate is kept, and every candidate is visited (no early
exit). It renders the same reader lines as the exact packer (header, section label, record
lines, metadata line), so the ratio exact / estimate compares the two on the same work.

It is a bench baseline, not a packer to use: its count is a guess, and the bench reports
how often the guess overran the budget once the output is counted exactly. It runs with
the cyclic garbage collector paused, as pack_candidates() does, so the ratio compares the
packing work and not when the collector happens to run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..formats import RecordView, get_format
from ..formats.metadata import metadata_line
from ..packing.gcpause import gc_paused
from ..records import Candidate, Level, Section

CHARS_PER_TOKEN = 4.2


@dataclass(frozen=True, slots=True)
class EstimatePack:
    context: str
    estimated_tokens: int
    packed: int


def _estimate(line: str) -> int:
    # ceil((len(line) + 1) / 4.2) without floats drifting: the "+ 1" is the line's newline.
    return -(-(len(line) + 1) * 10 // int(CHARS_PER_TOKEN * 10))


def estimate_pack(candidates: Sequence[Candidate], *, budget: int, overhead: int = 100,
                  context_format: str = "reader") -> EstimatePack:
    """Greedy score-order packing against ceil(chars / 4.2) estimates of each line."""
    with gc_paused():
        return _estimate_pack(candidates, budget=budget, overhead=overhead,
                              context_format=context_format)


def _estimate_pack(candidates: Sequence[Candidate], *, budget: int, overhead: int,
                   context_format: str) -> EstimatePack:
    fmt = get_format(context_format)
    available = budget - overhead
    header = fmt.header(speakers=any(c.speaker for c in candidates), citations=False)
    label = fmt.section_label(Section.CONTEXT, None)
    # The metadata line at its widest numbers, as the exact packer reserves it.
    reserve = _estimate(metadata_line(tokens_used=available, budget=budget, conflicts=[],
                                      excluded_count=len(candidates)))
    used = _estimate(header) + _estimate(label) + reserve
    lines: list[str] = []
    for c in sorted(candidates, key=lambda c: (-c.score, c.id)):
        line = fmt.record_line(RecordView(c, Level.FULL, c.content, None, ()))
        cost = _estimate(line)
        if used + cost <= available:
            lines.append(line)
            used += cost
    meta = metadata_line(tokens_used=used, budget=budget, conflicts=[],
                         excluded_count=len(candidates) - len(lines))
    context = "".join(f"{line}\n" for line in [header, label, *lines, meta]) if lines else ""
    return EstimatePack(context, used if lines else 0, len(lines))

"""Which record lines a pack will cost, rendered exactly as the packer renders them.

Used to cost a batch's unseen lines together (bulk.py, across processes when large) or to
load their persisted costs (costcache.py) before packing. It is only a forecast: a line it
misses is costed when the packer first needs it, and a line it adds is costed for nothing.
Neither changes a bundle, because a cached cost is the exact cost of that exact line.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..config import PackingConfig
from ..formats import RecordView, get_format
from ..records import Candidate, Level, Section, Tier
from ..tokens.counter import word_runs
from .layout import speaker_run
from .prepare import conflict_map, dedupe
from .represent import representation_text
from .selector import tier_of


def likely_lines(candidates: Sequence[Candidate], config: PackingConfig, budget: int) -> list[str]:
    """The FULL lines of the candidates a pack of `budget` tokens will most likely try.

    Those are every multi-path candidate when its ordering needs their costs (balanced,
    density), and the others in priority order until their token floors fill the budget.
    """
    pool, _ = dedupe(candidates)
    if not pool or budget <= config.overhead_tokens:
        return []
    fmt = get_format(config.context_format)
    numbered = config.numbered
    ref = f"m{len(pool)}" if numbered else None
    label = f"c{max(len(pool), 1)}"  # the provisional pair label the selector prices with
    conflicts = conflict_map(pool)
    costed_tier = Tier.MULTI_PATH if config.multipath_ordering != "score" else None
    room = budget - config.overhead_tokens
    lines = []
    for tier, _, _, c in sorted((tier_of(c), -c.score, c.id, c) for c in pool):
        if not c.has_text:
            continue
        if room <= 0 and tier is not costed_tier:
            continue
        text = representation_text(c, Level.FULL)
        assert text is not None  # FULL is the content itself, always a str
        contradicts = conflicts.get(c.id, ())
        labels = (label,) * len(contradicts) if fmt.labels_conflicts else ()
        view = RecordView(c, Level.FULL, text, ref, contradicts, labels)
        if speaker_run(fmt, view) is not None:
            # Priced as a run's line; the line naming its speaker is priced off that one
            # (LineCounter.joined_cost).
            view = RecordView(c, Level.FULL, text, ref, contradicts, labels, True)
        lines.append(fmt.record_line(view))
        room -= word_runs(text)
    return lines


def frame_lines(candidates: Sequence[Candidate], config: PackingConfig, budget: int) -> list[str]:
    """The header variants, the section labels of the candidates' namespaces, and the
    metadata line the packer reserves at its widest numbers (no conflicts)."""
    fmt = get_format(config.context_format)
    citations = config.context_citations
    widest = fmt.metadata_line(tokens_used=max(budget - config.overhead_tokens, 0),
                               budget=budget, conflicts=[], excluded_count=len(candidates))
    lines = [fmt.header(speakers=False, citations=citations),
             fmt.header(speakers=True, citations=citations), widest]
    for namespace in sorted({c.namespace_id for c in candidates}, key=lambda n: (n is not None, n)):
        lines.extend(fmt.section_label(section, namespace) for section in Section)
    if getattr(fmt, "speaker_lines", False):  # one speaker line per speaker that has one
        runs: dict[str, str] = {}
        for c in candidates:
            if c.speaker is not None and c.speaker not in runs and c.has_text:
                run = speaker_run(fmt, RecordView(c, Level.FULL, c.content, None))
                if run is not None:
                    runs[c.speaker] = run
        lines.extend(sorted(runs.values()))
    return lines


def standalone_lines(candidate: Candidate, context_format: str) -> list[str]:
    """A node's lines at every level its format shows, outside any pack: no citation
    reference and no conflict marks (what an ingest pass can cost ahead of time)."""
    fmt = get_format(context_format)
    levels = (Level.FULL, Level.PROSE) if fmt.text_levels_only else tuple(Level)
    lines = []
    for level in levels:
        text = representation_text(candidate, level)
        if text is not None:
            view = RecordView(candidate, level, text, None, ())
            lines.append(fmt.record_line(view))
            if speaker_run(fmt, view) is not None:  # as a run's line too, how packs price it
                lines.append(fmt.record_line(RecordView(candidate, level, text, None, (), (),
                                                        True)))
    return lines

"""Selection primitives for RFC-0006 sections 4 and 5: tiers, sections, levels, orderings,
and the Selector that packs one candidate at a time against a Layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Any

from ..config import PackingConfig
from ..formats import RecordView, get_format
from ..formats.base import is_builtin, shown_fields
from ..records import (
    ACTIVE_TASK_STATES,
    EPISODE_PATHS,
    LEVEL_ORDER,
    TEXT_LEVELS,
    Candidate,
    Level,
    NodeType,
    Reason,
    Section,
    Tier,
)
from ..tokens.counter import LineCounter
from ..unfrozen import new, unfrozen_twin
from .compat import version3
from .folding import FoldIndex, folds_into
from .layout import Entry, Layout, dated, print_key, speaker_run
from .metacost import MetadataCost
from .neighbours import SESSION_PATH, session_links
from .prepare import by_score, candidate_id
from .priced import LINE_ONLY, Priced, remember, remembered
from .represent import representation_text


def path_count(c: Candidate, session_packing: bool = False) -> int:
    """The given path_count, else the distinct paths; SESSION_CONTEXT counts only when
    session context packing is on."""
    if c.path_count is not None:
        return c.path_count
    paths = set(c.paths)
    if not session_packing:
        paths.discard(SESSION_PATH)
    return max(1, len(paths))


def tier_of(c: Candidate, session_packing: bool = False) -> Tier:
    # Spelled out (not c.is_pinned / c.is_active_task): it runs once per candidate per pack.
    if c.pinned or c.salience == 1.0 or (c.type is _TASK and c.lifecycle_state in _ACTIVE):
        return _PINNED_OR_TASK
    paths = c.paths
    if paths and not _EPISODE_PATHS.isdisjoint(paths):
        return _EPISODE
    if c.path_count is None and len(paths) < 2:
        return _REMAINING  # at most one distinct path
    if path_count(c, session_packing) >= 2:
        return _MULTI_PATH
    return _REMAINING


# Enum members as module constants: attribute access on an enum class is slow in 3.11.
_TASK = NodeType.TASK
_ACTIVE = ACTIVE_TASK_STATES
_EPISODE_PATHS = EPISODE_PATHS
_PINNED_OR_TASK, _EPISODE, _MULTI_PATH, _REMAINING = (
    Tier.PINNED_OR_TASK, Tier.EPISODE, Tier.MULTI_PATH, Tier.REMAINING)
_TIERS = tuple(Tier)


def _new_view(c: Candidate, level: Level, text: str, ref: str | None,
              contradicts: tuple[str, ...], labels: tuple[str, ...],
              speaker_above: bool = False) -> RecordView:
    """RecordView(...) at a quarter of its cost (see unfrozen.py): packing builds a view
    per candidate it prices."""
    view: Any = new(_UnfrozenView)  # an unfrozen view until its class switches
    view.candidate = c
    view.level = level
    view.text = text
    view.ref = ref
    view.contradicts = contradicts
    view.conflict_labels = labels
    view.speaker_above = speaker_above
    view.__class__ = RecordView
    return view


_UNASKED = object()
_UnfrozenView = unfrozen_twin(RecordView, ("candidate", "level", "text", "ref", "contradicts",
                                           "conflict_labels", "speaker_above"))


def section_of(c: Candidate, level: Level, conflicted: bool, fact_min_confidence: float) -> Section:
    """RFC section 6: conflicts go to context, pointers to references, the rest by type."""
    if conflicted:
        return _CONTEXT
    if level is _REFERENCE:
        return _REFERENCES
    kind = c.type
    if kind is _ENTITY:
        return _ENTITIES
    if kind is _FACT and c.confidence >= fact_min_confidence:
        return _FACTS
    if kind is _DECISION:
        return _DECISIONS
    if kind is _TASK and c.lifecycle_state in _ACTIVE:  # c.is_active_task, spelled out
        return _TASKS
    return _CONTEXT


_CONTEXT, _REFERENCES, _ENTITIES, _FACTS, _DECISIONS, _TASKS = (
    Section.CONTEXT, Section.REFERENCES, Section.ENTITIES, Section.FACTS, Section.DECISIONS,
    Section.TASKS)
_REFERENCE = Level.REFERENCE
_ENTITY, _FACT, _DECISION = NodeType.ENTITY, NodeType.FACT, NodeType.DECISION


class Outcome:
    """Per-candidate bookkeeping that becomes the receipt's candidate rows."""

    __slots__ = ("candidate", "tier", "order_key", "tried", "entry", "reason", "full_cost")

    def __init__(self, candidate: Candidate, tier: Tier) -> None:
        self.candidate = candidate
        self.tier = tier
        self.order_key: float | None = None
        # A tuple, grown by concatenation: most candidates are never tried, and () + t is t
        # itself, so an untried or bulk-decided candidate allocates nothing here.
        self.tried: tuple[Level, ...] = ()
        self.entry: Entry | None = None
        self.reason: Reason | None = None
        self.full_cost: int | None = None


class Selector:
    """Runs the priority tiers against a Layout, recording an Outcome per candidate."""

    def __init__(self, pool: Sequence[Candidate], *, available: int, config: PackingConfig,
                 counter: LineCounter, metadata: MetadataCost,
                 conflicts: dict[str, tuple[str, ...]]) -> None:
        self.config = config
        self.fmt = get_format(config.context_format)
        self._speaker_lines = bool(getattr(self.fmt, "speaker_lines", False))
        self._builtin = is_builtin(self.fmt)
        self._labels_conflicts = self.fmt.labels_conflicts
        self._date_order = getattr(self.fmt, "date_order", None)
        self._runs: dict[tuple[str, Level], str | None] = {}
        self.counter = counter
        self.available = available
        self.conflicts = conflicts
        session_packing = config.session_context_packing is not None
        # Each candidate's outcome, and the candidates of each tier in the pool's order (by
        # id); tiers 2 and 4 are ordered by score, their order key.
        self.outcomes: dict[str, Outcome] = {}
        self.by_tier: dict[Tier, list[Candidate]] = {tier: [] for tier in _TIERS}
        outcomes, by_tier = self.outcomes, self.by_tier
        remaining_tier = by_tier[_REMAINING]
        for c in pool:
            paths = c.paths
            if (type(paths) is tuple and c.path_count is None and len(paths) < 2
                    and not c.pinned and c.salience != 1.0 and c.type is not _TASK
                    and not (paths and paths[0] in _EPISODE_PATHS)):
                # tier_of()'s answer for most of a pool (one path, no pin, no task), spelled
                # out: the call cost more than the test, once per candidate per pack. Only
                # for a tuple, as checked rows hold: a hand-built Candidate may hold a set.
                outcomes[c.id] = outcome = Outcome(c, _REMAINING)
                remaining_tier.append(c)
                outcome.order_key = c.score
                continue
            tier = tier_of(c, session_packing)
            outcomes[c.id] = outcome = Outcome(c, tier)
            by_tier[tier].append(c)
            if tier is _REMAINING or tier is _EPISODE:
                outcome.order_key = c.score
        self.links = session_links(pool, config.session_window) if session_packing else {}
        self.triggers = {trigger.id for trigger in self.links.values()}
        promoted = False
        for neighbour_id, trigger in self.links.items():
            outcome = self.outcomes[neighbour_id]
            if outcome.tier is Tier.REMAINING and self.outcomes[trigger.id].tier <= Tier.MULTI_PATH:
                outcome.tier = Tier.MULTI_PATH
                promoted = True
        if promoted:  # neighbours moved up to tier 3: sort the tiers again, in id order
            by_tier[Tier.REMAINING] = [c for c in by_tier[Tier.REMAINING]
                                       if outcomes[c.id].tier is Tier.REMAINING]
            by_tier[Tier.MULTI_PATH] = [c for c in pool if outcomes[c.id].tier is Tier.MULTI_PATH]
        self.folding = config.fold_repeated_text and self.fmt.folds_repeated_text
        self.fold_index = FoldIndex()
        numbered = config.numbered
        self.provisional_ref = f"m{len(pool)}" if numbered else None
        # Pair labels are numbered at assembly; the widest one costs every line meanwhile.
        self.provisional_label = f"c{max(len(pool), 1)}"
        self.layout = Layout(self.fmt, counter, config.context_citations, metadata)
        self.allowed = _allowed_levels(config, self.fmt.text_levels_only)
        self.text_required = self.fmt.text_levels_only or config.min_level in TEXT_LEVELS
        self._sequence = 0
        self._pool = pool
        self._text_ladder = self.allowed in ((Level.FULL,), (Level.FULL, Level.PROSE))
        # highest_fit over FULL (and PROSE), the reader's default: levels() would list FULL,
        # whose text always exists, then PROSE when the candidate has a distinct one.
        self._exhaust_ladder = (config.representation_policy == "highest_fit"
                                and self._text_ladder)
        self._prose = Level.PROSE in self.allowed
        self._rank: dict[str, float] | None = None
        self._version3 = version3()  # replaying a receipt of version 3 or earlier
        # Built-in formats' priced lines are remembered across packs (priced.py), keyed
        # by the format's class.
        self._memo_class = type(self.fmt) if self._builtin and not self._version3 else None

    # -- levels and costs ---------------------------------------------------------------

    def view(self, c: Candidate, level: Level) -> RecordView | None:
        text = representation_text(c, level)
        return None if text is None else self._view_of(c, level, text)

    def _view_of(self, c: Candidate, level: Level, text: str) -> RecordView:
        """The view the line is priced with: the widest citation ref and pair labels, so
        the line assembly prints (refs and labels numbered in context order) costs no more."""
        contradicts = self.conflicts.get(c.id, ())
        labels = (self.provisional_label,) * len(contradicts) if self.fmt.labels_conflicts else ()
        if not self._speaker_lines or (c.speaker is None and self._builtin):
            # No run to name: a built-in format names no speaker a record lacks.
            return _new_view(c, level, text, self.provisional_ref, contradicts, labels)
        run = self._runs.get((c.id, level), _UNASKED)
        if run is _UNASKED:
            run = self.run_of(_new_view(c, level, text, self.provisional_ref, contradicts,
                                        labels))
        # Priced as a run's line; a run of one adds its speaker back (Layout.line_extra).
        return _new_view(c, level, text, self.provisional_ref, contradicts, labels,
                         run is not None)

    def priced(self, c: Candidate, level: Level, text: str) -> Priced:
        """c at `level` as packing prices it (_view_of's view, its line, date lines, run and
        speaker flag), remembered across packs for a built-in format (priced.py)."""
        key = self._memo_key(c, level, text)
        got = None if key is None else remembered(key)
        if got is None or got.dates is LINE_ONLY:
            return self._fresh(c, level, text, key)
        if got.view.candidate is not c:
            # A candidate equal in every shown field priced it (a new object per SQL pack,
            # the same node at another score, or -0.0 for 0.0): the line is the same, but
            # the entry must carry this candidate. (Priced(...) spelled out:
            # NamedTuple._replace costs four times as much.)
            v = got.view
            got = Priced(_new_view(c, level, v.text, v.ref, v.contradicts, v.conflict_labels,
                                   v.speaker_above),
                         got.line, got.dates, got.run, got.speaker, got.key)
        return got

    def priced_line(self, c: Candidate, level: Level, text: str) -> str:
        """priced(c, level, text).line, with no view built for `c` when the line is
        remembered: the balanced ordering reads only the cost of every multi-path line."""
        key = self._memo_key(c, level, text)
        got = None if key is None else remembered(key)
        if got is not None:
            return got.line
        view = self._view_of(c, level, text)
        line = self.fmt.record_line(view)
        if key is not None:
            # The line only: the date lines, run and print key wait until it is tried
            # (priced()), which most multi-path records never are.
            remember(key, Priced(view, line, LINE_ONLY, None, False, None))
        return line

    def _fresh(self, c: Candidate, level: Level, text: str, key: tuple | None) -> Priced:
        """c at `level` priced afresh, and remembered under `key` (None: not remembered)."""
        got = self._price(self._view_of(c, level, text))
        if key is not None:
            remember(key, got)
        return got

    def _memo_key(self, c: Candidate, level: Level, text: str) -> tuple | None:
        """The priced memo's key for c at `level`: every field of the view it is priced
        with but the candidate's floats (formats/base.py, UNSHOWN_FIELDS), or None when
        this pack's lines are not remembered."""
        if self._memo_class is None:
            return None
        contradicts = self.conflicts.get(c.id, ())
        labels = (self.provisional_label,) * len(contradicts) if self._labels_conflicts else ()
        return (self._memo_class, shown_fields(c), level, text, self.provisional_ref,
                contradicts, labels)

    def _price(self, view: RecordView) -> Priced:
        """What packing reads of a record shown as `view`, asked of the format."""
        fmt = self.fmt
        dates = dated(fmt, view)
        return Priced(view, fmt.record_line(view), dates, self.run_of(view),
                      fmt.shows_speaker(view),
                      print_key(view, dates, self._date_order) if self._speaker_lines else None)

    def run_of(self, view: RecordView) -> str | None:
        """speaker_run(fmt, view), once per record and level: packing prices the same
        records again and again, always with the same provisional ref and labels."""
        key = (view.candidate.id, view.level)
        if key not in self._runs:
            self._runs[key] = speaker_run(self.fmt, view)
        return self._runs[key]

    def full_cost(self, c: Candidate) -> int:
        outcome = self.outcomes[c.id]
        if outcome.full_cost is None:
            line = self.priced_line(c, _FULL, c.content)  # FULL text is the content
            outcome.full_cost = self.counter.line_cost(line)
        return outcome.full_cost

    def line_cost(self, c: Candidate, level: Level) -> int:
        """Exact tokens of c's line at `level` (a very large number when it has none)."""
        view = self.view(c, level)
        if view is None:
            return 1 << 62
        return self.counter.line_cost(self.fmt.record_line(view))

    def remaining(self) -> int:
        return self.available - self.layout.used

    def least_cost(self, c: Candidate) -> int:
        """A floor on the line cost of `c` at any level it may be packed at."""
        if self._text_ladder:  # FULL (and PROSE): the content, or a distinct prose text
            floor = self.counter.lower_bound(c.content)
            if c.prose is not None and self._prose:
                text = representation_text(c, Level.PROSE)
                if text is not None:
                    floor = min(floor, self.counter.lower_bound(text))
            return floor
        floors = [self.counter.lower_bound(text) for level in self.allowed
                  if (text := representation_text(c, level)) is not None]
        return min(floors, default=0)

    def least_costs(self, sequence: Sequence[Candidate]) -> list[int]:
        """[least_cost(c) for c in sequence], with the reader's common case (FULL only, or
        FULL and PROSE for candidates without a prose text) read straight off the counter."""
        if not self._text_ladder:
            return [self.least_cost(c) for c in sequence]
        floors = self.counter.lower_bounds([c.content for c in sequence])
        if self._prose:  # a distinct prose text may be cheaper than the content
            least_cost = self.least_cost
            for i, c in enumerate(sequence):
                if c.prose is not None:
                    floors[i] = least_cost(c)
        return floors

    def sort_sure_misses(self, run: Sequence[Candidate], remaining: int,
                         settled: list[Candidate], misses: list[Candidate]) -> None:
        """Append each candidate of `run` (none can fit in `remaining`) to `settled` when
        exhaust() decides it the same whenever it runs while the budget has room left, else
        to `misses`. Settled means its decision reads no packed record (no fold source, no
        conflict pair a later pack could place it by) and no remaining-budget share
        (highest_fit over text)."""
        if remaining <= 0 or not self._exhaust_ladder:
            misses.extend(run)
            return
        conflicts = self.conflicts
        if self.folding:
            for c in run:
                (misses if c.evidence_ids or c.id in conflicts else settled).append(c)
        elif conflicts:
            for c in run:
                (misses if c.id in conflicts else settled).append(c)
        else:
            settled.extend(run)

    def exhaust(self, rest: Sequence[Candidate], *, remaining: int | None = None) -> None:
        """Decide every candidate of `rest` at once, as trying each in turn would: nothing
        in `rest` can fit any more (the caller checked every floor), so nothing is packed,
        the remaining budget stays put, and each candidate records the levels it would try.
        `remaining` is the budget they were found not to fit (the current one by default).
        """
        if remaining is None:
            remaining = self.remaining()
        outcomes, exhausted = self.outcomes, Reason.BUDGET_EXHAUSTED
        if remaining <= 0:
            # The usual end of a pack (most of a large pool): nothing is tried, so each
            # undecided candidate only takes the reason.
            for outcome in map(outcomes.__getitem__, map(candidate_id, rest)):
                if outcome.entry is None and outcome.reason is None:
                    outcome.reason = exhausted
            return
        folding, text_required = self.folding, self.text_required
        text_ladder = self._exhaust_ladder
        prose = Level.PROSE in self.allowed
        for c in rest:
            outcome = outcomes[c.id]
            if outcome.entry is not None or outcome.reason is not None:
                continue
            if folding and c.evidence_ids and self.covered(c):
                outcome.reason = Reason.FOLDED
            elif text_required and (not (content := c.content) or content.isspace()):
                outcome.reason = Reason.NO_TEXT  # c.has_text, spelled out: it runs per miss
            elif text_ladder:
                with_prose = (prose and c.prose is not None
                              and representation_text(c, Level.PROSE) is not None)
                outcome.tried += _FULL_AND_PROSE if with_prose else _FULL_ONLY
                outcome.reason = exhausted
            else:
                levels = self.levels(c)
                outcome.tried += tuple(levels)  # every level levels() lists has its text
                outcome.reason = self._miss_reason(c, levels)

    # -- inclusion ------------------------------------------------------------------------

    def try_include(self, c: Candidate, levels: Sequence[Level]) -> bool:
        """Pack `c` at the first of `levels` that fits; record why not otherwise."""
        outcome = self.outcomes[c.id]
        if outcome.entry is not None:
            return True  # never place one record twice
        if self.text_required and not c.has_text:
            outcome.reason = Reason.NO_TEXT
            return False
        conflicted = bool(self.conflicts.get(c.id))
        for level in levels:
            text = representation_text(c, level)
            if text is None:
                continue
            outcome.tried += (level,)
            # Cheap floor first: a line that cannot fit is never rendered nor tokenized.
            if self.counter.lower_bound(text) > self.remaining():
                continue
            # Priced with the widest pair labels it can print ("conflict c12"), never fewer.
            priced = (self._price(RecordView(c, level, text, self.provisional_ref,
                                             self.conflicts.get(c.id, ())))
                      if self._version3 else self.priced(c, level, text))
            view, line = priced.view, priced.line
            cost = self.counter.line_cost(line)
            if level is _FULL and outcome.full_cost is None:
                outcome.full_cost = cost
            if cost > self.remaining() and not conflicted and (
                    self.layout.speakers or not self.layout.records):
                # Adding a line costs no less than the line: label, date lines and
                # metadata only add when no conflict pair is new, and the header changes
                # only with the first speaker, whose header a format may make shorter.
                # (A reader date line that joins the line saves a token or two, which this
                # cheap check gives up: the outcome is the same on every path.)
                continue
            section = section_of(c, level, conflicted, self.config.fact_min_confidence)
            entry = Entry(view, line, cost, section, int(outcome.tier), self._sequence,
                          priced.speaker, priced.dates, priced.run, key=priced.key)
            delta = self.layout.delta(entry)
            if delta <= self.remaining():
                self.layout.add(entry, delta)
                self._sequence += 1
                outcome.entry, outcome.reason = entry, None
                self.fold_into(c)
                return True
        outcome.reason = self._miss_reason(c, levels)
        return False

    def cheapest_addition(self, c: Candidate, levels: Sequence[Level]) -> Level | None:
        """The level of `levels` whose line adds the fewest tokens to the layout as it is
        (its section heading and date lines included); the higher level on a tie."""
        best: tuple[int, Level] | None = None
        conflicted = bool(self.conflicts.get(c.id))
        for level in levels:
            text = representation_text(c, level)
            if text is None:
                continue
            view, line, dates, run, speaker, key = self.priced(c, level, text)
            section = section_of(c, level, conflicted, self.config.fact_min_confidence)
            entry = Entry(view, line, self.counter.line_cost(line), section,
                          int(self.outcomes[c.id].tier), self._sequence, speaker, dates, run,
                          key=key)
            delta = self.layout.delta(entry)
            if best is None or delta < best[0]:
                best = (delta, level)
        return None if best is None else best[1]

    def _miss_reason(self, c: Candidate, levels: Sequence[Level]) -> Reason:
        if not levels:
            return Reason.BELOW_MIN_FIDELITY
        return Reason.BUDGET_EXHAUSTED

    def include_with_counterparts(self, c: Candidate, levels: Sequence[Level]) -> bool:
        """Pack `c`, then at once its CONTRADICTS counterparts, so a conflict travels whole."""
        if not self.try_include(c, levels):
            return False
        self.include_counterparts(c)
        return True

    def include_counterparts(self, c: Candidate) -> None:
        for other_id in self.conflicts.get(c.id, ()):
            other = self.outcomes.get(other_id)  # None: below min_score, never packed
            if other is not None and other.entry is None and other.reason is None:
                self.try_include(other.candidate, self.levels(other.candidate))

    # -- folded repeated text ------------------------------------------------------------

    def covered(self, c: Candidate) -> bool:
        """A packed record from one of c's source events already shows c's text."""
        if not self.folding or not c.evidence_ids:
            return False
        view = self.view(c, Level.FULL)
        assert view is not None  # every candidate has FULL text: content is a str
        text = view.text.strip()
        if not text:
            return False  # folds_into(view, ...) is False for every record
        sources = c.evidence_ids
        return any(
            entry.candidate.id != c.id and not _disjoint(sources, entry.candidate.evidence_ids)
            and folds_into(view, entry.view)
            for entry in self.fold_index.showing(text)  # folds_into's first test
        )

    def fold_into(self, c: Candidate) -> None:
        """Index c's entry; drop earlier packed records from one of c's source events whose
        text c now shows."""
        entry = self.outcomes[c.id].entry
        if not self.folding or entry is None or not c.evidence_ids:
            return
        sources = c.evidence_ids
        for other in self.fold_index.shown_in(entry.view.text):  # folds_into's first test
            outcome = self.outcomes[other.candidate.id]
            if (other is not entry and outcome.entry is other
                    and outcome.tier is not Tier.PINNED_OR_TASK
                    and not _disjoint(sources, other.candidate.evidence_ids)
                    and not self._in_adjacent_window(other.candidate)
                    and folds_into(other.view, entry.view)):
                self.unpack(outcome, Reason.FOLDED)
        self.fold_index.add(entry)

    def unplace(self, c: Candidate) -> None:
        """Take c's packed entry out again (the section 7 ladder re-levels pins and tasks)."""
        outcome = self.outcomes[c.id]
        if outcome.entry is not None:
            self.unpack(outcome, Reason.BUDGET_OVERFLOW)
            outcome.reason = None

    def _in_adjacent_window(self, c: Candidate) -> bool:
        """Packed members of an "adjacent" session window are never folded away (RFC 5)."""
        if self.config.session_context_packing != "adjacent" or not self.links:
            return False
        return c.id in self.links or c.id in self.triggers

    def unpack(self, outcome: Outcome, reason: Reason) -> None:
        """Take a packed record out of the layout (and the fold index), with its reason."""
        entry = outcome.entry
        assert entry is not None, "only a packed outcome can be unpacked"
        self.layout.remove(entry)
        self.fold_index.discard(entry)
        outcome.entry, outcome.reason = None, reason

    def decided(self, c: Candidate) -> bool:
        outcome = self.outcomes[c.id]
        return outcome.entry is not None or outcome.reason is not None

    # -- representation policy -------------------------------------------------------------

    def levels(self, c: Candidate, *, priority_one: bool = False) -> list[Level]:
        """Levels to try, best first, under the configured representation policy."""
        if self._exhaust_ladder and (c.prose is None or not self._prose):
            return [_FULL]  # highest_fit over text with no prose to offer: the common case
        available = [lv for lv in self.allowed if representation_text(c, lv) is not None]
        if self.config.representation_policy == "highest_fit":
            return available
        start = self._fraction_start(c, priority_one)
        ladder = [level for level in available if LEVEL_ORDER.index(level) >= start]
        if self.fmt.text_levels_only and (
                priority_one or start <= LEVEL_ORDER.index(Level.STRUCTURED)):
            # The reader shows only text: STRUCTURED-class records, pins and tasks as text.
            ladder = available
        if priority_one:
            return ladder  # RFC Priority 1: STRUCTURED, else KEY_VALUE, else REFERENCE
        if self.outcomes[c.id].tier is not Tier.MULTI_PATH:
            return ladder[:1]  # RFC Priorities 2 and 4: the chosen level or nothing
        # RFC Priority 3: the chosen level, else a bare REFERENCE, else nothing.
        return ladder[:1] + [lv for lv in ladder[1:] if lv is Level.REFERENCE]

    @property
    def rank(self) -> dict[str, float]:
        """Each candidate's score rank as a fraction (the budget_fraction policy only)."""
        if self._rank is None:
            ranked = sorted(self._pool, key=lambda c: (-c.score, c.id))
            n = len(ranked)
            self._rank = {c.id: i / n for i, c in enumerate(ranked)}
        return self._rank

    def _fraction_start(self, c: Candidate, priority_one: bool) -> int:
        share = self.remaining() / self.available if self.available > 0 else 0.0
        rank = self.rank[c.id]
        if priority_one:
            return LEVEL_ORDER.index(Level.STRUCTURED if share > 0.2 else Level.KEY_VALUE)
        if share > 0.5:
            return LEVEL_ORDER.index(Level.STRUCTURED if rank < 0.5 else Level.KEY_VALUE)
        if share > 0.2:
            return LEVEL_ORDER.index(Level.REFERENCE if rank >= 0.75 else Level.KEY_VALUE)
        return LEVEL_ORDER.index(Level.REFERENCE)


def _allowed_levels(config: PackingConfig, text_only: bool) -> tuple[Level, ...]:
    return _levels_down_to(config.min_level, text_only)


@cache  # a few values each: asked once a pack, which a GROUP BY runs thousands of times
def _levels_down_to(min_level: Level, text_only: bool) -> tuple[Level, ...]:
    floor = LEVEL_ORDER.index(min_level)
    levels = [level for level in LEVEL_ORDER if LEVEL_ORDER.index(level) <= floor]
    if text_only:
        # The reader shows memory text only: the full text, or a stored prose summary.
        levels = [level for level in levels if level in (Level.FULL, Level.PROSE)] or [Level.FULL]
    return tuple(levels)


def order_multipath(selector: Selector, tier: list[Candidate], ordering: str) -> list[Candidate]:
    """RFC section 5 Priority 3 orderings: balanced (default), score or density.

    `tier` is in id order, so a stable sort on the key alone orders ties by id."""
    outcomes = selector.outcomes
    if ordering == "score":
        for c in tier:
            outcomes[c.id].order_key = c.score
        return by_score(tier)
    power = 1.0 if ordering == "density" else 0.25
    head = None
    if ordering == "balanced":
        # The reserved head is an ordinary multi-path record (path_count >= 2), never a
        # one-path session neighbour promoted into the tier (RFC section 5).
        session = selector.config.session_context_packing is not None
        # The first eligible one in (-score, id) order: most of a large tier is never asked.
        head = next((c for c in by_score(tier) if (c.has_text or not selector.text_required)
                     and path_count(c, session) >= 2), None)
    full_cost = selector.full_cost
    keys = []
    for c in tier:
        outcome = outcomes[c.id]
        if c is head:
            key = math.inf
        else:
            cost = outcome.full_cost
            key = c.score / max(full_cost(c) if cost is None else cost, 1) ** power
        outcome.order_key = key
        keys.append(key)
    order = sorted(range(len(tier)), key=keys.__getitem__, reverse=True)
    return [tier[i] for i in order]


def _disjoint(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """No source event in common (a few ids each: no sets built)."""
    return not any(source in b for source in a)


_FULL = Level.FULL
_FULL_ONLY = (Level.FULL,)
_FULL_AND_PROSE = (Level.FULL, Level.PROSE)

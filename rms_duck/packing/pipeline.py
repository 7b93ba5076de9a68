"""pack_candidates(): RFC-0006 sections 5 and 7 end to end, from rows to a MemoryBundle.

Pure and deterministic: no clock, no randomness, no DuckDB. Candidates are put into one
total order (tier, order key, id) before anything is packed, so neither the input order,
the hash seed nor the process changes the result.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Mapping
from decimal import Decimal
from itertools import accumulate
from numbers import Integral
from typing import Any

from ..bundle import ROW_REASON, MemoryBundle, TraceRow
from ..candidates import CheckedCandidates, to_candidates
from ..config import PackingConfig, parse_config
from ..errors import CandidateError, ConfigError
from ..metrics import bundle_metrics
from ..records import (
    LEVEL_ORDER,
    Candidate,
    Flag,
    IncludedRecord,
    Level,
    Reason,
    Tier,
)
from ..sha import sha256_text
from ..tokens.counter import LineCounter
from ..tokens.encodings import encoding_source
from ..unfrozen import new, unfrozen_twin
from .assemble import Assembly, assemble
from .compat import version3, version6
from .gcpause import gc_paused
from .guidance import build_guidance
from .layout import Entry
from .metacost import metadata_cost
from .neighbours import arrange_adjacent
from .prepare import by_score, conflict_map, dedupe
from .selector import Selector, order_multipath

# Budgets, token counts and positions are stored and returned as 32-bit INTEGERs.
MAX_BUDGET = 2**31 - 1
LOG = logging.getLogger("rms_duck")


def pack_candidates(candidates: Iterable[Mapping[str, Any] | Candidate], *, budget: int,
                    config: PackingConfig | Mapping[str, Any] | str | None = None,
                    counter: LineCounter | None = None) -> MemoryBundle:
    """Pack candidates into `budget` tokens.

    Args:
        candidates: rows with at least id, score and content (any order).
        budget: the context budget in tokens, overhead included.
        config: a PackingConfig, a dict of its fields, or JSON text.

    Returns:
        A MemoryBundle with tokens_used == len(encode_ordinary(context)) <= budget - overhead.

    Raises:
        CandidateError, ConfigError, EncodingUnavailableError: bad input; nothing is packed.
    """
    with gc_paused():
        return _pack(candidates, budget=budget, config=config, counter=counter)


def _check_iterable_of_records(candidates: object) -> None:
    """Iterated as it is, a DataFrame or Arrow table gave its column names (or columns) as
    the records, a dict its keys and a string its letters: "candidate #0 must be a record
    ..., got 'id'" hid what to pass, and None (or a number) raised a bare TypeError."""
    if not isinstance(candidates, Iterable) or isinstance(candidates, (str, bytes, Mapping)) \
            or hasattr(candidates, "__arrow_c_stream__") or hasattr(candidates, "columns"):
        from .batches import lazy_frame_fix  # batches imports this module

        lazy = lazy_frame_fix(candidates, records=True)
        if lazy is not None:  # it holds no rows yet, so the fix below would not run on it
            raise CandidateError(
                f"candidates must be an iterable of records (dicts or Candidates), got {lazy}")
        raise CandidateError(
            f"candidates must be an iterable of records (dicts or Candidates), got "
            f"{type(candidates).__name__}; for a DataFrame or Arrow table pass "
            "df.to_dict('records') (polars: df.to_dicts()) or table.to_pylist(), or pack the "
            "table itself with "
            "rms_duck.pack(con, table, budget=..., store=False); for one record, [record]")


def _pack(candidates: Iterable[Mapping[str, Any] | Candidate], *, budget: int,
          config: PackingConfig | Mapping[str, Any] | str | None,
          counter: LineCounter | None) -> MemoryBundle:
    config = parse_config(config)
    budget = _check_budget(budget)
    available = _available(budget, config)
    rows: list[Candidate]
    if type(candidates) is CheckedCandidates:
        rows = candidates
    else:
        _check_iterable_of_records(candidates)
        rows = to_candidates(candidates)
    if counter is not None and not isinstance(counter, LineCounter):
        # An encoding name failed here with "'str' object has no attribute 'encoding'".
        raise ConfigError(
            f"counter must be a rms_duck.tokens.counter.LineCounter or None, got "
            f"{type(counter).__name__} {counter!r:.80}; pass "
            f"counter=LineCounter({config.encoding!r}), or set the encoding with "
            f"config={{'encoding': ...}}")
    counter = counter or LineCounter(config.encoding)
    if counter.encoding != config.encoding:
        raise ConfigError(
            f"the counter passed counts with {counter.encoding!r} but config field 'encoding' "
            f"is {config.encoding!r}; pass LineCounter({config.encoding!r}) or no counter")
    pool, duplicates = dedupe(rows)
    pool, below = split_min_score(pool, config)
    # A counterpart below min_score is still a candidate: a packed record it contradicts is
    # marked and its pair listed, as when the counterpart does not fit (it is never packed).
    conflicts = conflict_map(pool + below if below and not version6() else pool)

    metadata = metadata_cost(config.format, counter, budget=budget, available=available,
                             excluded_count=len(rows), widest_label=f"c{max(len(pool), 1)}")
    selector = Selector(pool, available=available, config=config, counter=counter,
                        metadata=metadata, conflicts=conflicts)
    flags: list[str] = []
    if budget <= 0:
        flags.append(Flag.BUDGET_ERROR.value)
        for outcome in selector.outcomes.values():
            outcome.reason = Reason.BUDGET_ERROR
    else:
        if _run_tiers(selector):
            flags.append(Flag.BUDGET_OVERFLOW.value)
    guidance = build_guidance(config.query, config.reference_time,
                              mode=config.context_guidance_mode,
                              date_word=config.format.date_word)
    assembly = _assemble_within(selector, budget, available, len(rows), guidance)
    overflow = Reason.BUDGET_OVERFLOW  # one enum lookup, not one per candidate
    overflowed = [o.candidate.id for o in selector.outcomes.values() if o.reason is overflow]
    if overflowed and Flag.BUDGET_OVERFLOW.value not in flags:
        flags.append(Flag.BUDGET_OVERFLOW.value)
    if overflowed:
        # RFC section 7 step 3: log a BUDGET_OVERFLOW warning (the flag stays for SQL).
        LOG.warning("BUDGET_OVERFLOW: %d pinned or active-task record(s) left out of a "
                    "%d-token budget (%d available): %s", len(overflowed), budget, available,
                    ", ".join(sorted(overflowed)[:10]))
    if guidance is not None and assembly.guidance is None and assembly.entries:
        flags.append(Flag.GUIDANCE_OMITTED.value)
    if not assembly.entries and budget > 0:
        flags.append((Flag.NOTHING_FIT if rows else Flag.NO_CANDIDATES).value)
    return _bundle(selector, assembly, duplicates, below, budget, available, config, flags)


def split_min_score(pool: list[Candidate],
                    config: PackingConfig) -> tuple[list[Candidate], list[Candidate]]:
    """(kept, below): candidates scoring under config.min_score, pins and active tasks aside."""
    if config.min_score <= 0:
        return pool, []
    kept: list[Candidate] = []
    below: list[Candidate] = []
    for c in pool:
        low = c.score < config.min_score and not (c.is_pinned or c.is_active_task)
        (below if low else kept).append(c)
    return kept, below


def _check_budget(budget: object) -> int:
    if type(budget) is int and -MAX_BUDGET - 1 <= budget <= MAX_BUDGET:
        return budget  # the usual case, before the checks of every other type
    if isinstance(budget, float) and budget.is_integer():
        budget = int(budget)
    elif isinstance(budget, Decimal) and budget.is_finite() and budget == int(budget):
        budget = int(budget)  # SQL DECIMAL and HUGEINT values arrive as Decimal
    elif isinstance(budget, Integral) and not isinstance(budget, (bool, int)):
        budget = int(budget)  # numpy and other integer types (np.int64 from a DataFrame)
    if isinstance(budget, bool) or not isinstance(budget, int):
        raise ConfigError(
            f"budget must be a whole number of tokens, got "
            f"{'None (SQL NULL)' if budget is None else repr(budget)}; pass for example 4096"
        )
    if not -MAX_BUDGET - 1 <= budget <= MAX_BUDGET:
        raise ConfigError(
            f"budget must be in {-MAX_BUDGET - 1:,}..{MAX_BUDGET:,} tokens (it is stored as a "
            f"32-bit INTEGER), got {budget:,}; pass a budget in 1..{MAX_BUDGET:,} (0 or less "
            "gives BUDGET_ERROR)")
    return budget


def _available(budget: int, config: PackingConfig) -> int:
    """budget - overhead_tokens, floored at the smallest 32-bit INTEGER (rms_bundles stores
    it as one). Only a budget that is already BUDGET_ERROR can reach the floor, and the RFC
    wants such a budget to give an empty bundle, not an error."""
    return max(budget - config.overhead_tokens, -MAX_BUDGET - 1)


def _run_tiers(sel: Selector) -> bool:
    """Pack tier by tier; return True when a pin or active task had to be dropped."""
    # One order for the tiers after the first: (tier, order key, id). Order keys are fixed
    # before packing: the score in tiers 2 and 4, set with the tiers (Selector), and the
    # multi-path ones when ordered. Each tier's list is in the pool's order: by id.
    by_tier = sel.by_tier
    overflow = _pack_pins_and_tasks(sel, by_tier[Tier.PINNED_OR_TASK])
    sequence = (by_score(by_tier[Tier.EPISODE])
                + order_multipath(sel, by_tier[Tier.MULTI_PATH], sel.config.multipath_ordering)
                + by_score(by_tier[Tier.REMAINING]))
    floors = sel.least_costs(sequence)
    least = _suffix_minima(floors)
    misses: list[Candidate] = []
    settled: list[Candidate] = []
    i, n = 0, len(sequence)
    while i < n:
        remaining = sel.remaining()
        if remaining < least[i]:
            # Early exit: no candidate from here on can fit, so none is tried one by one.
            misses.extend(sequence[i:])
            break
        if _SKIP_SURE_MISSES:
            # A run of candidates that cannot fit at any level: decide them as trying each
            # would (the early exit's rule), without building their levels. The run changes
            # nothing, so the budget stays put while it is found; it is decided together
            # before the next real attempt, except those whose decision reads nothing a
            # later attempt changes, which wait for the end (a budget with a few tokens left
            # tries many short records in between).
            end = _next_possible_fit(floors, i, remaining)
            if end > i:
                sel.sort_sure_misses(sequence[i:end], remaining, settled, misses)
                i = end
                continue
        if misses:
            sel.exhaust(misses)
            misses = []
        _attempt(sel, sequence[i])
        i += 1
    if settled:
        sel.exhaust(settled, remaining=1)  # each was passed over with room left
    if misses:
        sel.exhaust(misses)
    return overflow


# tests/test_fast_paths.py turns this off to check the skip changes no byte.
_SKIP_SURE_MISSES = True


def _next_possible_fit(floors: list[int], start: int, remaining: int) -> int:
    """The first index from `start` on whose floor fits in `remaining` (len(floors) if none):
    a tight scan, as most of a large pool is passed over once the budget is nearly full."""
    end, n = start, len(floors)
    while end < n and floors[end] > remaining:
        end += 1
    return end


def _suffix_minima(values: list[int]) -> list[int]:
    """out[i] = min(values[i:])."""
    return list(accumulate(reversed(values), min))[::-1]


def _attempt(sel: Selector, c: Candidate) -> None:
    if sel.decided(c):
        return
    if sel.remaining() <= 0:
        sel.outcomes[c.id].reason = Reason.BUDGET_EXHAUSTED
        return
    if sel.covered(c):
        sel.outcomes[c.id].reason = Reason.FOLDED
        return
    sel.include_with_counterparts(c, sel.levels(c))


def _pack_pins_and_tasks(sel: Selector, tier: list[Candidate]) -> bool:
    """RFC section 7 ladder. Returns True when any pin or task ends up excluded.

    Conflict counterparts of packed pins and tasks are placed only after the whole tier, so
    a low-priority counterpart never crowds out a pin.
    """
    ordered = sorted(tier, key=lambda c: (-c.score, c.id))
    if sel.text_required:
        # A record with no text has nothing to show at any level; it is not an overflow.
        for c in ordered:
            if not c.has_text:
                sel.outcomes[c.id].reason = Reason.NO_TEXT
        ordered = [c for c in ordered if c.has_text]
    for c in ordered:
        sel.outcomes[c.id].order_key = c.score
        sel.try_include(c, sel.levels(c, priority_one=True))
    if not all(sel.outcomes[c.id].entry is not None for c in ordered):
        if not _downgrade_to_fit(sel, ordered):
            _degrade(sel, ordered)
        if not version6() and not all(sel.outcomes[c.id].entry is not None for c in ordered):
            _place_exactly(sel, ordered)
    for c in ordered:
        if sel.outcomes[c.id].entry is not None:
            sel.include_counterparts(c)
    return any(sel.outcomes[c.id].entry is None for c in ordered)


def _downgrade_to_fit(sel: Selector, ordered: list[Candidate]) -> bool:
    """Step 1 of the ladder: downgrade pins and tasks so that all of them fit.

    Every pin and task goes in at its cheapest allowed level (usually KEY_VALUE or
    REFERENCE, but a short text's FULL line can be cheaper than its pointer); then, in
    priority order, each is raised back to the highest level that still fits beside all the
    others. A record's cheapest line can sit in a section of its own, whose heading costs
    more than the line saves: when the cheapest lines do not fit together, every record goes
    in at its lowest level instead (pointers share one references section), and failing that
    each at the level that adds the fewest tokens beside those placed before it. False, with
    the layout emptied, when none fits.
    """
    for pick in _CHEAP_PICKS[:1] if version6() else _CHEAP_PICKS:
        _restart(sel, ordered)
        if all((level := pick(sel, c)) is not None and sel.try_include(c, [level])
               for c in ordered):
            break
    else:
        _restart(sel, ordered)
        return False
    for c in ordered:
        outcome = sel.outcomes[c.id]
        assert outcome.entry is not None
        current = outcome.entry.level
        levels = sel.levels(c, priority_one=True)
        better = levels[: levels.index(current)] if current in levels else []
        if better:
            sel.unplace(c)
            if not sel.try_include(c, better):
                sel.try_include(c, [current])  # its own room is free again, so it fits
    return True


def _degrade(sel: Selector, ordered: list[Candidate]) -> None:
    """Steps 2 and 3 of the ladder, for when step 1 could not place every pin and task."""
    # Step 2: all active tasks first, then the pins with the highest STR that still fit.
    tasks = [c for c in ordered if c.is_active_task]
    pins = sorted((c for c in ordered if not c.is_active_task),
                  key=lambda c: (-c.score / max(sel.full_cost(c), 1), c.id))
    _restart(sel, ordered)
    if all(sel.try_include(c, sel.levels(c, priority_one=True)) for c in tasks):
        kept = set(tasks)
        for c in pins:
            if sel.try_include(c, sel.levels(c, priority_one=True)):
                kept.add(c)
        if _keep_more_by_downgrading(sel, ordered, tasks, pins, kept):
            return
        _restart(sel, ordered)  # the first placement again, byte for byte
        for c in tasks + pins:
            sel.try_include(c, sel.levels(c, priority_one=True))
        for c in pins:
            if c not in kept:
                sel.outcomes[c.id].reason = Reason.BUDGET_OVERFLOW
        return
    if _keep_more_by_downgrading(sel, ordered, tasks, pins, None):
        return
    # Step 3: active tasks at their lowest allowed level only; no pins.
    _restart(sel, ordered)
    for c in tasks:
        if not sel.try_include(c, sel.levels(c, priority_one=True)[-1:]):
            sel.outcomes[c.id].reason = Reason.BUDGET_OVERFLOW
    for c in pins:
        sel.outcomes[c.id].reason = Reason.BUDGET_OVERFLOW


def _keep_more_by_downgrading(sel: Selector, ordered: list[Candidate], tasks: list[Candidate],
                              pins: list[Candidate], kept: set[Candidate] | None) -> bool:
    """Step 2 with downgrades: every active task, then each pin in STR order that fits beside
    those kept when all of them drop to cheap levels (as in step 1: each at its cheapest
    line, or each at its lowest level, whichever keeps the higher-STR pins). True, with that
    set placed as step 1 places it, when it keeps higher-STR pins than `kept` (the placement
    at each one's highest fitting level), or keeps every task where that placement (`kept`
    None) could not; False, with the layout emptied, when it changes nothing or even the
    tasks alone do not fit. Always False in a replay of a receipt of version 6 or earlier,
    whose step 2 did not downgrade (the caller's placement stands; compat.py)."""
    if version6():
        return False
    best: set[Candidate] | None = None
    best_key: tuple[bool, ...] = ()
    for pick in _CHEAP_PICKS:
        _restart(sel, ordered)
        if not all((level := pick(sel, c)) is not None and sel.try_include(c, [level])
                   for c in tasks):
            continue
        chosen = set(tasks)
        for c in pins:
            level = pick(sel, c)
            if level is not None and sel.try_include(c, [level]):
                chosen.add(c)
        key = tuple(c in chosen for c in pins)  # the higher-STR pins first
        if best is None or key > best_key:
            best, best_key = chosen, key
    _restart(sel, ordered)
    if best is None or (kept is not None and best_key <= tuple(c in kept for c in pins)):
        return False  # the first placement keeps these pins, or higher-STR ones
    if not _downgrade_to_fit(sel, [c for c in ordered if c in best]):
        return False  # (a format whose first speaker shortens the header) nothing changes
    for c in pins:
        if c not in best:
            sel.outcomes[c.id].reason = Reason.BUDGET_OVERFLOW
    return True


# The exact ladder searches every placement of the pins and tasks when it can try at most
# this many layouts. Placements number the product over tasks of their levels and over pins
# of their levels plus one (left out); the search tries each record of each at most once, so
# placements times records bounds its trials: four pins or tasks at five levels each make
# 1,296 placements and at most 5,184 trials (some 40 ms). It stops at the first placement
# that keeps the most pins, so most searches try a few hundred.
EXACT_LADDER_TRIALS = 6000


def _place_exactly(sel: Selector, ordered: list[Candidate]) -> None:
    """Section 7 exactly, when the ladder's rules of thumb left a pin or task out and the
    pins and tasks are few: the best placement of all, by the RFC's preferences. Every
    active task first (step 2 keeps them all), then the highest-STR pins (the kept pins
    compared in STR order, the higher first), then, among placements keeping the same
    records, the higher levels (compared in priority order). A placement is each kept record
    put in, in priority order, at its level with the Selector's exact line costs and layout,
    each fitting beside those before it. It replaces the heuristics' placement only when it
    is better; when no placement keeps every task, step 3's stands. Never in a replay of a
    receipt of version 6 or earlier (compat.py)."""
    # An empty layout lists each record's levels at least as long as the present one (only
    # budget_fraction reads the layout, and starts lower with less room left): too many
    # placements now is too many there, and the placement stays untouched.
    if not _searchable(sel, ordered):
        return
    tasks = [c for c in ordered if c.is_active_task]
    pins = sorted((c for c in ordered if not c.is_active_task),
                  key=lambda c: (-c.score / max(sel.full_cost(c), 1), c.id))
    outcomes = sel.outcomes
    placed = {c: e for c in ordered if (e := outcomes[c.id].entry) is not None}
    state = {c: (outcomes[c.id].reason, outcomes[c.id].tried) for c in ordered}
    _clear_tier(sel, ordered)
    ladders = {c: sel.levels(c, priority_one=True) for c in ordered}  # on an empty layout
    kept_tasks = all(c in placed for c in tasks)
    best: dict[Candidate, Level] | None = None
    if _searchable(sel, ordered, ladders) and (
            kept_tasks or _first_fit(sel, tasks, ladders) is not None):
        heuristic = (tuple(c in placed for c in pins),
                     _level_key(ordered, ladders, {c: e.level for c, e in placed.items()}))
        for mask in _masks(len(pins)):
            if kept_tasks and mask < heuristic[0]:
                break  # the heuristics' placement keeps these pins or higher-STR ones
            _clear_tier(sel, ordered)
            kept = set(tasks).union(p for p, keep in zip(pins, mask, strict=True) if keep)
            best = _first_fit(sel, [c for c in ordered if c in kept], ladders)
            if best is not None:
                if kept_tasks and mask == heuristic[0] and (
                        _level_key(ordered, ladders, best) >= heuristic[1]):
                    best = None  # the same records, at levels no higher than the heuristics'
                break
    _clear_tier(sel, ordered)
    if best is None:
        # Too many placements to search, none keeping every task (step 3's stands), or none
        # better than the heuristics': theirs is put back as it was.
        _restore(sel, ordered, placed, state)
        return
    for c in ordered:
        if c in best:
            ladder = ladders[c]
            fits = sel.try_include(c, [best[c]])
            assert fits, "a placement found to fit fits again"
            # The receipt's tried: its levels from the highest down to the one placed, each
            # higher one tried in the search and given up for the records kept.
            outcomes[c.id].tried = tuple(ladder[: ladder.index(best[c]) + 1])
        else:
            outcomes[c.id].reason = Reason.BUDGET_OVERFLOW


def _searchable(sel: Selector, ordered: list[Candidate],
                ladders: Mapping[Candidate, list[Level]] | None = None) -> bool:
    """Whether searching every placement tries at most EXACT_LADDER_TRIALS layouts."""
    limit = EXACT_LADDER_TRIALS // max(len(ordered), 1)
    size = 1
    for c in ordered:
        levels = sel.levels(c, priority_one=True) if ladders is None else ladders[c]
        size *= len(levels) + (not c.is_active_task)  # a pin may also be left out
        if size > limit:
            return False  # many pins and tasks stop here, after a few
    return True


def _clear_tier(sel: Selector, ordered: list[Candidate]) -> None:
    """_restart() for the pins and tasks alone, which are all the layout holds while the
    ladder runs (no counterpart is placed before it ends): no pass over the whole pool per
    placement searched."""
    for c in ordered:
        outcome = sel.outcomes[c.id]
        outcome.entry, outcome.reason, outcome.tried = None, None, ()
    sel.layout.clear()
    sel.fold_index.clear()


def _level_key(ordered: list[Candidate], ladders: Mapping[Candidate, list[Level]],
               levels: Mapping[Candidate, Level]) -> tuple[int, ...]:
    """Each placed record's place in its ladder, in priority order (the smaller, the higher;
    a level off its ladder after every other)."""
    return tuple(ladders[c].index(levels[c]) if levels[c] in ladders[c] else len(LEVEL_ORDER)
                 for c in ordered if c in levels)


def _restore(sel: Selector, ordered: list[Candidate], placed: Mapping[Candidate, Entry],
             state: Mapping[Candidate, tuple[Reason | None, tuple[Level, ...]]]) -> None:
    """Put the heuristics' placement back as it was: its entries in their order, each
    record's reason and the levels it tried."""
    for c, entry in sorted(placed.items(), key=lambda item: item[1].order):
        sel.layout.add(entry, sel.layout.delta(entry))
        sel.outcomes[c.id].entry = entry
        sel.fold_into(c)
    for c in ordered:
        sel.outcomes[c.id].reason, sel.outcomes[c.id].tried = state[c]


def _masks(n: int) -> Iterator[tuple[bool, ...]]:
    """Every keep/leave-out choice for n pins, the highest-STR pin's first: all kept first,
    then as a binary number counting down (the first pin is the highest bit)."""
    for number in range((1 << n) - 1, -1, -1):
        yield tuple(bool(number >> (n - 1 - i) & 1) for i in range(n))


def _first_fit(sel: Selector, records: list[Candidate],
               ladders: Mapping[Candidate, list[Level]]) -> dict[Candidate, Level] | None:
    """The first placement of `records` (in this order, each at one of its levels, the
    highest first) that fits, by depth-first search on the live layout; None when none
    does."""
    chosen: dict[Candidate, Level] = {}

    def place(i: int) -> bool:
        if i == len(records):
            return True
        c = records[i]
        for level in ladders[c]:
            if sel.try_include(c, [level]):
                chosen[c] = level
                if place(i + 1):
                    return True
                del chosen[c]
                sel.unplace(c)
        return False

    return chosen if place(0) else None


def _cheapest_line(sel: Selector, c: Candidate) -> Level | None:
    levels = sel.levels(c, priority_one=True)
    return min(levels, key=lambda lv: sel.line_cost(c, lv)) if levels else None


def _lowest_level(sel: Selector, c: Candidate) -> Level | None:
    levels = sel.levels(c, priority_one=True)
    return levels[-1] if levels else None


def _cheapest_addition(sel: Selector, c: Candidate) -> Level | None:
    return sel.cheapest_addition(c, sel.levels(c, priority_one=True))


# The cheap placements step 1 tries, in turn (the first is the one earlier packs used).
_CHEAP_PICKS = (_cheapest_line, _lowest_level, _cheapest_addition)


def _restart(sel: Selector, tier: list[Candidate]) -> None:
    """Empty the layout; only tier-1 records (and their counterparts) were placed so far."""
    kept = (None, Reason.NO_TEXT)  # built once: it is read per candidate of the pool
    for outcome in sel.outcomes.values():
        if outcome.entry is not None or outcome.reason not in kept:
            outcome.entry, outcome.reason, outcome.tried = None, None, ()
    sel.layout.clear()
    sel.fold_index.clear()


def _assemble_within(sel: Selector, budget: int, available: int, n_rows: int,
                     guidance: str | None) -> Assembly:
    """Assemble; if the exact whole output overshoots, drop the last-packed record and retry."""
    numbered = sel.config.numbered
    arrange = None
    if sel.config.session_context_packing == "adjacent" and sel.links:
        def arrange(entries):
            return arrange_adjacent(entries, sel.links)
    while True:
        packed = [(o, o.entry) for o in sel.outcomes.values() if o.entry is not None]
        pairs = [list(pair) for pair in sorted(sel.layout.pairs)]
        assembly = assemble(sel.layout, budget=budget, available=available, conflicts=pairs,
                            excluded_count=n_rows - len(packed), numbered=numbered,
                            guidance=guidance, arrange=arrange)
        if assembly is None and arrange is not None and not version6():
            assembly = _gather_what_fits(sel, budget, available, pairs,
                                         n_rows - len(packed), guidance)
        if assembly is not None:
            return assembly
        victim, entry = max(packed, key=lambda p: (p[0].tier is not Tier.PINNED_OR_TASK,
                                                   p[1].order))
        dropped = Reason.BUDGET_OVERFLOW if victim.tier is Tier.PINNED_OR_TASK else (
            Reason.BUDGET_EXHAUSTED)
        sel.unpack(victim, dropped)
        if not version3():
            # A record folded into the one just dropped no longer has its text shown.
            for outcome in sel.outcomes.values():
                if outcome.reason is Reason.FOLDED and not sel.covered(outcome.candidate):
                    outcome.reason = Reason.BUDGET_EXHAUSTED


def _gather_what_fits(sel: Selector, budget: int, available: int, pairs: list[list[str]],
                      excluded_count: int, guidance: str | None) -> Assembly | None:
    """"adjacent" packs the same records as "trigger_tier" (RFC section 5): when gathering
    every session window restates date lines the layout (priced in date order) has no room
    for, gather the windows that still fit, in trigger id order, and leave the others in
    date order, rather than drop a record."""
    def assembled(only: frozenset[str]) -> Assembly | None:
        def arrange(entries):
            return arrange_adjacent(entries, sel.links, only)
        return assemble(sel.layout, budget=budget, available=available, conflicts=pairs,
                        excluded_count=excluded_count, numbered=sel.config.numbered,
                        guidance=guidance, arrange=arrange)

    gathered: frozenset[str] = frozenset()
    assembly = assembled(gathered)
    if assembly is None:
        return None
    members: dict[str, int] = {}  # packed records per window: one alone has nothing to gather
    for outcome in sel.outcomes.values():
        if outcome.entry is not None:
            c = outcome.candidate
            key = sel.links[c.id].id if c.id in sel.links else (
                c.id if c.id in sel.triggers else None)
            if key is not None:
                members[key] = members.get(key, 0) + 1
    for trigger in sorted(key for key, n in members.items() if n > 1):
        trial = assembled(gathered | {trigger})
        if trial is not None:
            gathered, assembly = gathered | {trigger}, trial
    return assembly


def _bundle(sel: Selector, assembly: Assembly, duplicates: list[Candidate],
            below: list[Candidate], budget: int, available: int, config: PackingConfig,
            flags: list[str]) -> MemoryBundle:
    position = {e.view.candidate.id: i for i, e in enumerate(assembly.entries)}
    included = tuple(map(_included, assembly.entries))
    trace = _decisions(sel, assembly, below, duplicates, position)
    conflicts = tuple(sorted(sel.layout.pairs))  # the layout tracks its packed pairs
    metrics = bundle_metrics(included, available)
    return MemoryBundle(
        context=assembly.context, tokens_used=assembly.tokens_used, context_budget=budget,
        available=available, included=included, conflicts=conflicts,
        flags=tuple(flags), context_references=assembly.references,
        context_guidance=assembly.guidance, config=config, metrics=metrics,
        context_sha256=sha256_text(assembly.context),
        encoding_sha256=encoding_source(config.encoding).sha256,
        guidance_shown=assembly.guidance is not None,
        trace=trace,
        # No flag, no warning: most bundles skip the three flag lookups.
        warnings=empty_context_warnings(flags, trace, budget, available, config) if flags
        else (),
        with_has_content=not version6())


def _included(e: Entry) -> IncludedRecord:
    """IncludedRecord(...) filled as its unfrozen twin, then given its class (unfrozen.py):
    a quarter of the cost of setting each slot through its descriptor."""
    c, view = e.view.candidate, e.view
    record: Any = new(_UnfrozenIncluded)  # an unfrozen record until its class switches
    record.id = c.id
    record.section = e.section
    record.namespace_id = c.namespace_id
    record.representation = view.level
    record.tokens = e.cost
    record.ref = view.ref
    record.score = c.score
    record.tier = _TIERS[e.tier]
    record.conflict = bool(view.contradicts)
    record.source_type = c.source_type._value_
    record.epistemic = c.epistemic_type._value_
    record.__class__ = IncludedRecord
    return record


_TIERS = {int(tier): tier for tier in Tier}
_TIER_NUMBER = {tier: int(tier) for tier in Tier}
# Every field is set above, or a record would miss one: fail at import, not at first use.
_UnfrozenIncluded = unfrozen_twin(IncludedRecord, (
    "id", "section", "namespace_id", "representation", "tokens", "ref", "score", "tier",
    "conflict", "source_type", "epistemic"))


def empty_context_warnings(flags: list[str], trace: tuple[TraceRow, ...], budget: int,
                           available: int, config: PackingConfig) -> tuple[str, ...]:
    """Why a context holds no record, in words (empty when it holds some)."""
    if Flag.NO_CANDIDATES.value in flags:
        return ("no candidates were given: an empty list, or a ranking query that "
                "returned no rows",)
    if Flag.BUDGET_ERROR.value in flags:
        return (f"budget {budget} is not a positive number of tokens, so nothing was packed "
                "(each candidate is excluded with BUDGET_ERROR); pass a budget such as 4096",)
    if Flag.NOTHING_FIT.value not in flags:
        return ()
    # Nothing fit, so every trace row is an exclusion, its reason spelled as the value.
    counts: dict[str, int] = {}
    for row in trace:
        reason = row[ROW_REASON] or ""  # never empty: no row was packed
        counts[reason] = counts.get(reason, 0) + 1
    reasons = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    text = f"none of {len(trace)} candidates was packed ({reasons})"
    if counts.get(Reason.BELOW_MIN_SCORE.value) == len(trace):
        return (f"{text}: every candidate scored below min_score {config.min_score:g}; "
                "lower min_score or improve the ranking",)
    if not ({Reason.BUDGET_EXHAUSTED.value, Reason.BUDGET_OVERFLOW.value} & set(counts)):
        return (f"{text}; each excluded candidate carries its reason",)
    return (f"{text}: {max(available, 0)} tokens were available (budget {budget} minus "
            f"overhead_tokens {config.overhead_tokens}), too few for the section header, "
            "the metadata line and one record; raise the budget or lower overhead_tokens",)


def _decisions(sel: Selector, assembly: Assembly, below: list[Candidate],
               duplicates: list[Candidate], position: dict[str, int]) -> tuple[TraceRow, ...]:
    """Each candidate's fate, frozen once in one pass as its trace row (sorted by id, then
    those below min_score, then duplicates: the receipt's order). The bundle's excluded
    records derive from these rows when first read (bundle.py). It runs once per candidate
    per pack, so it is written for speed."""
    final = assembly.entries  # position: candidate id -> its entry's place here
    rows: list[TraceRow] = []
    # The ladders tried are a few distinct tuples per pack (each record tried builds its
    # own): spell each once, found by value (Level hashes as its str value, in C).
    spelled: dict[tuple[Level, ...], tuple[str, ...]] = {}
    exhausted = Reason.BUDGET_EXHAUSTED._value_
    tier_number = _TIER_NUMBER
    last_levels: tuple[Level, ...] | None = None
    tried: tuple[str, ...] = ()
    add_row = rows.append
    for o in sel.outcomes.values():  # sorted by id: the pool is
        c, levels = o.candidate, o.tried
        if levels is not last_levels:  # runs of candidates share one ladder: look it up once
            known = spelled.get(levels)
            if known is None:
                known = spelled[levels] = tuple(level._value_ for level in levels)
            last_levels, tried = levels, known
        if o.entry is None:  # not in the layout, so not in the context
            # _value_, not .value: the enum property costs a Python call per candidate.
            add_row((c.id, c.score, c.content, c.source_type._value_, c.epistemic_type._value_,
                     None, tier_number[o.tier], o.order_key, tried, None, 0,
                     exhausted if o.reason is None else o.reason._value_, None))
        else:
            at = position[c.id]
            entry = final[at]
            add_row((c.id, c.score, c.content, c.source_type._value_, c.epistemic_type._value_,
                     c.has_text, tier_number[o.tier], o.order_key, tried,
                     entry.view.level._value_, entry.cost, None, at))
    rows += [_unranked_row(c, Reason.BELOW_MIN_SCORE.value)
             for c in sorted(below, key=lambda c: c.id)]
    rows += [_unranked_row(c, Reason.DUPLICATE.value) for c in duplicates]
    return tuple(rows)


def _unranked_row(c: Candidate, reason: str) -> TraceRow:
    """The trace row of a candidate left out before ranking (below min_score, duplicate)."""
    return (c.id, c.score, c.content, c.source_type._value_, c.epistemic_type._value_, None,
            None, None, (), None, 0, reason, None)


__all__ = ["pack_candidates"]

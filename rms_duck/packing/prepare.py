"""Repeated ids: keep one candidate per id, the same one whatever the input order."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from ..records import Candidate


def dedupe(rows: Sequence[Candidate]) -> tuple[list[Candidate], list[Candidate]]:
    """Return (kept, duplicates). The kept one has the highest score, then the smallest repr.

    Choosing by content rather than position keeps the result independent of input order.
    """
    best: dict[str, Candidate] = {}
    duplicates: list[Candidate] = []
    for c in rows:
        seen = best.get(c.id)
        if seen is None:
            best[c.id] = c
            continue
        if (-c.score, repr(c)) < (-seen.score, repr(seen)):
            best[c.id], c = c, seen
        duplicates.append(c)
    duplicates.sort(key=lambda c: (c.id, -c.score, repr(c)))
    return sorted(best.values(), key=candidate_id), duplicates


candidate_id = attrgetter("id")  # a candidate's id, read in C


def by_score(in_id_order: Sequence[Candidate]) -> list[Candidate]:
    """Sorted by (-score, id) for candidates already in id order (as dedupe leaves the pool):
    a stable sort on the score alone keeps equal scores in id order, with a C key instead of
    a Python tuple per candidate."""
    return sorted(in_id_order, key=_SCORE, reverse=True)


_SCORE = attrgetter("score")


def conflict_map(pool: Sequence[Candidate]) -> dict[str, tuple[str, ...]]:
    """For each id, the ids in the pool it shares a CONTRADICTS edge with (either direction)."""
    linking = [c for c in pool if c.contradicts]  # most pools have none: no id set then
    if not linking:
        return {}
    present = {c.id for c in pool}
    links: dict[str, set[str]] = {}
    for c in linking:
        for other in c.contradicts:
            if other in present and other != c.id:
                links.setdefault(c.id, set()).add(other)
                links.setdefault(other, set()).add(c.id)
    return {key: tuple(sorted(value)) for key, value in links.items()}

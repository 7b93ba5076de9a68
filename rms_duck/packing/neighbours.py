"""Session-context neighbours (RFC section 5, opt-in): tiering and adjacent placement.

A neighbour is a candidate that session expansion added: its only path is SESSION_CONTEXT.
Its trigger is the highest-ranked other candidate of the same session and namespace whose
window (session_window positions either side) holds it. With "trigger_tier" a neighbour
whose trigger sits in the multi-path tier or above joins the multi-path tier. "adjacent"
packs exactly the same records and then prints each window's packed members together, in
session order, within their section.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..records import Candidate

SESSION_PATH = "SESSION_CONTEXT"


def is_neighbour(c: Candidate) -> bool:
    return bool(c.paths) and set(c.paths) == {SESSION_PATH}


def session_links(pool: Sequence[Candidate], window: int) -> dict[str, Candidate]:
    """neighbour id -> its trigger: the best-ranked non-neighbour whose window holds it."""
    triggers: dict[tuple[str | None, str], list[Candidate]] = {}
    for c in sorted(pool, key=lambda c: (-c.score, c.id)):
        if c.session_id is not None and c.session_position is not None and not is_neighbour(c):
            triggers.setdefault((c.namespace_id, c.session_id), []).append(c)
    # Per session, each position's best-ranked trigger and its rank: a neighbour looks at the
    # 2 * window + 1 positions around it rather than at every trigger of a long session.
    at: dict[tuple[str | None, str], dict[int, tuple[int, Candidate]]] = {}
    for key, ranked in triggers.items():
        positions = at[key] = {}
        for rank, trigger in enumerate(ranked):
            assert trigger.session_position is not None  # triggers holds positioned ones only
            positions.setdefault(trigger.session_position, (rank, trigger))
    links = {}
    for c in pool:
        if not is_neighbour(c) or c.session_id is None or c.session_position is None:
            continue
        key, p = (c.namespace_id, c.session_id), c.session_position
        ranked = triggers.get(key, [])
        if 2 * window + 1 >= len(ranked):
            for trigger in ranked:  # fewer triggers than positions to look at
                assert trigger.session_position is not None
                if abs(trigger.session_position - p) <= window:
                    links[c.id] = trigger
                    break
            continue
        positions = at[key]
        near = [got for q in range(p - window, p + window + 1)
                if (got := positions.get(q)) is not None]
        if near:
            links[c.id] = min(near, key=lambda got: got[0])[1]
    return links


def window_key(c: Candidate, links: dict[str, Candidate]) -> str | None:
    """The trigger id naming the window `c` belongs to, if any."""
    if c.id in links:
        return links[c.id].id
    if any(trigger.id == c.id for trigger in links.values()):
        return c.id
    return None


def arrange_adjacent(entries: list, links: dict[str, Candidate],
                     only: frozenset[str] | None = None) -> list:
    """Reorder a section's entries so each window's members sit together in session order.

    The window takes the place of its first member; other entries keep their order. With
    `only`, just the windows of those trigger ids are gathered.
    """
    triggers = {trigger.id for trigger in links.values()}
    windows: dict[str, list] = {}
    for entry in entries:
        key = _key(entry.candidate, links, triggers)
        if key is not None and (only is None or key in only):
            windows.setdefault(key, []).append(entry)
    if not any(len(members) > 1 for members in windows.values()):
        return entries
    placed: set[str] = set()
    out = []
    for entry in entries:
        key = _key(entry.candidate, links, triggers)
        if key is None or key not in windows:
            out.append(entry)
        elif key not in placed:
            placed.add(key)
            out.extend(sorted(windows[key],
                              key=lambda e: (e.candidate.session_position, e.candidate.id)))
    return out


def _key(c: Candidate, links: dict[str, Candidate], triggers: set[str]) -> str | None:
    if c.id in links:
        return links[c.id].id
    return c.id if c.id in triggers else None

"""Pool shapes that once made packing super-linear. Each test counts operations, never time."""

from __future__ import annotations

import pytest

from rms_duck import pack_candidates
from rms_duck.formats import base, legacy, reader
from rms_duck.packing import layout

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def _text(i: int, words: int) -> str:
    return " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(words)) + f" {i}."


def test_raising_downgraded_pins_takes_each_out_without_a_pass_over_the_others(monkeypatch):
    """The section 7 ladder puts every pin in at its cheapest level, then takes each out
    and puts it back higher. Taking one out rebuilt the conflict pairs and recounted every
    packed line, so the ladder was quadratic in pins (8,000 pins: 6.0 s, now 0.33 s)."""
    n = 400
    pins = [{"id": f"p{i:04d}", "score": 0.5, "pinned": True, "content": _text(i, 60),
             "prose": f"short {i}"} for i in range(n)]
    visited = [0]
    pairs_of = layout._pairs_of

    def counted(entry):
        visited[0] += 1
        return pairs_of(entry)

    monkeypatch.setattr(layout, "_pairs_of", counted)
    bundle = pack_candidates(pins, budget=12_000, config={"fold_repeated_text": False})
    levels = {r.representation for r in bundle.included}
    assert len(bundle.included) == n and levels == {"full", "prose"}, levels  # raised some
    assert visited[0] <= 10 * n, visited[0]  # a rebuild per pin taken out: 161,754


def test_records_citing_the_same_sources_are_not_compared_once_per_shared_source(monkeypatch):
    """Folding compared each candidate with every packed record of each of its sources, and
    each packed record with every earlier one of each source: records citing the same 50
    events cost 50 comparisons per pair (1,000 of them: 12.3 s, now 0.07 s; 4,000 claims
    of one source event: 4.9 s, now 0.56 s). Now a pair whose texts do not contain one
    another is not compared at all."""
    from rms_duck.packing import selector

    n = 300
    sources = [f"e{k}" for k in range(20)]
    rows = [{"id": f"n{i:04d}", "score": 0.5, "content": _text(i, 8), "evidence_ids": sources}
            for i in range(n)]
    compared = [0]
    folds_into = selector.folds_into

    def counted(inner, outer):
        compared[0] += 1
        return folds_into(inner, outer)

    monkeypatch.setattr(selector, "folds_into", counted)
    bundle = pack_candidates(rows, budget=50_000)
    assert len(bundle.included) == n
    assert compared[0] <= n, compared[0]  # once per source and pair: 1,794,000


def test_a_session_neighbour_looks_at_the_positions_around_it_not_at_every_trigger(monkeypatch):
    """A neighbour's trigger was found by walking the session's triggers in rank order, so a
    long session whose neighbours sit near low-ranked triggers (or none) cost neighbours x
    triggers (4,000 of each: 0.74 s of an 8,000-candidate pack, now 0.14 s in all)."""
    from rms_duck.packing import neighbours

    n = 400
    rows = [{"id": f"t{i:04d}", "score": 0.9 - i / 1e4, "content": _text(i, 4),
             "paths": ["LEXICAL", "VECTOR"], "session_id": "s", "session_position": 10 * i}
            for i in range(n)]
    rows += [{"id": f"s{i:04d}", "score": 0.1, "content": _text(i, 5),
              "paths": ["SESSION_CONTEXT"], "session_id": "s", "session_position": 10 * i + 1}
             for i in range(n)]
    measured = [0]

    def counted(x):
        measured[0] += 1
        return abs(x)

    monkeypatch.setattr(neighbours, "abs", counted, raising=False)
    bundle = pack_candidates(rows, budget=50_000,
                             config={"session_context_packing": "trigger_tier"})
    assert len(bundle.included) == 2 * n
    tiers = {r.id[0]: r.tier for r in bundle.included}
    assert tiers == {"t": 3, "s": 3}, tiers  # each neighbour found its trigger
    assert measured[0] <= n, measured[0]  # every trigger down to the neighbour's: 80,200


@pytest.mark.parametrize(("fmt", "module", "name"), [
    ("reader", reader, "reader_metadata_line"),  # a pair label each
    ("compact", base, "metadata_line"),  # a JSON pair label each
    ("auditable", base, "metadata_line"),  # the pair's two ids each
    ("reader@5", legacy, "reader_v5_metadata_line"),  # replays of receipt version 5
    ("reader@3", legacy, "short_metadata_line"),  # of versions 2 to 4
])
def test_a_new_conflict_pair_does_not_render_and_count_the_whole_metadata_line(
        monkeypatch, fmt, module, name):
    """The metadata line reserved while packing lists every packed conflict pair, and each
    record that brought a new pair rendered and counted the whole line twice, so a pack was
    quadratic in its pairs (8,000 pairs, each record contradicting the next: 12.9 s in the
    reader format, 72 s in auditable; now 0.33 and 0.45 s). Now each pair's part is counted
    once."""
    n = 400
    rows = [{"id": f"n{i:04d}", "score": 0.5, "content": _text(i, 6),
             "contradicts": [f"n{i + 1:04d}"]} for i in range(n)]  # the last: not in the pool
    listed = [0]
    render = getattr(module, name)

    def counted(**fields):
        listed[0] += len(fields["conflicts"])
        return render(**fields)

    monkeypatch.setattr(module, name, counted)
    bundle = pack_candidates(rows, budget=50_000, config={"context_format": fmt})
    assert len(bundle.included) == n and len(bundle.conflicts) == n - 1
    assert listed[0] <= 10 * n, listed[0]  # the whole line per new pair: 160,000

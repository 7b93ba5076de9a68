"""The priced-line memo (packing/priced.py): remembered across packs, never stale, bounded."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rms_duck.bench.simulate import _candidate
from rms_duck.formats.base import clear_render_memos
from rms_duck.packing import priced
from rms_duck.packing.arrowtype import bundle_row
from rms_duck.packing.pipeline import pack_candidates
from tests.thorough import examples

FORMATS = ({}, {"context_format": "compact"}, {"context_format": "auditable"},
           {"context_citations": True}, {"fact_min_confidence": 0.0})


def pool(seed: int, ids: list[str]) -> list[dict]:
    rng = random.Random(seed)
    return [_candidate(rng, node, ids) for node in ids]


def both(rows: list, budget: int, config: dict) -> tuple[tuple, tuple]:
    """The pack with every memo warm from earlier packs, and the same pack cold: the
    context, the receipt and the bundle's row (its records' scores included)."""
    warm = pack_candidates(rows, budget=budget, config=config)
    clear_render_memos()
    cold = pack_candidates(rows, budget=budget, config=config)
    return ((warm.context, warm.tokens_used, warm.receipt, repr(bundle_row(warm))),
            (cold.context, cold.tokens_used, cold.receipt, repr(bundle_row(cold))))


@given(st.integers(0, 10**6), st.integers(1, 40), st.sampled_from([120, 600, 4096]),
       st.sampled_from(FORMATS))
@settings(max_examples=examples(60), deadline=None)
def test_a_record_priced_before_with_other_fields_is_priced_afresh(seed, n, budget, config):
    """The same ids with other fields (speaker, tags, dates, text, conflicts, validity) in
    the next pack: the memo answers nothing it should not, so warm equals cold."""
    ids = [f"n{i:03d}" for i in range(n)]
    pack_candidates(pool(seed, ids), budget=budget, config=config)  # warms the memo
    warm, cold = both(pool(seed + 1, ids), budget, config)
    assert warm == cold
    # The first pool again, every line of it remembered by now.
    pack_candidates(pool(seed, ids), budget=budget, config=config)
    warm, cold = both(pool(seed, ids), budget, config)
    assert warm == cold


def test_an_equal_candidate_that_prints_apart_is_the_one_the_bundle_shows():
    """-0.0 == 0.0, so a candidate scored -0.0 finds the line a candidate scored 0.0 was
    priced with; the bundle must still show its own score (and its own object)."""
    from rms_duck.records import Candidate

    def rows(score: float) -> list[Candidate]:
        return [Candidate(id=f"n{i}", score=score, content=f"note {i}", speaker="Maya")
                for i in range(5)]

    pack_candidates(rows(0.0), budget=4096)
    mine = rows(-0.0)
    warm, cold = both(mine, 4096, {})
    assert warm == cold
    bundle = pack_candidates(mine, budget=4096)
    assert [str(r.score) for r in bundle.included] == ["-0.0"] * 5


def test_clearing_the_render_memos_empties_it():
    pack_candidates(pool(3, [f"n{i}" for i in range(20)]), budget=4096)
    assert priced._MEMO
    clear_render_memos()
    assert not priced._MEMO


def test_it_stays_within_its_entries_and_text(monkeypatch):
    monkeypatch.setattr(priced, "_LIMIT", 50)
    clear_render_memos()
    rows = [{"id": f"r{i}", "score": 0.5, "content": f"record number {i}"} for i in range(400)]
    pack_candidates(rows, budget=100_000)
    assert 0 < len(priced._MEMO) <= 50
    huge = "word " * (priced._CHARS // 64)  # larger than one entry may be
    clear_render_memos()
    pack_candidates([{"id": "big", "score": 1.0, "content": huge}], budget=1_000_000)
    assert not priced._MEMO
    held = sum(len(p.view.text) + len(p.line) for p in priced._MEMO.values())
    assert held == priced._held[0] == 0


@pytest.mark.parametrize("config", [{}, {"context_format": "compact"}])
def test_text_held_is_counted_as_entries_come_and_go(monkeypatch, config):
    monkeypatch.setattr(priced, "_CHARS", 64 * 400)  # room for a few hundred short lines
    clear_render_memos()
    for round_ in range(5):
        rows = [{"id": f"r{round_}-{i}", "score": 0.5, "content": "some text " * 8}
                for i in range(200)]
        pack_candidates(rows, budget=100_000, config=config)
        held = sum(len(p.view.text) + len(p.line) for p in priced._MEMO.values())
        assert held == priced._held[0] <= priced._CHARS

"""What receipt version 4 fixed: a conflicting record is priced with the pair labels it
prints, FOLDED always means an included record shows the text, and adjacent session packing
keeps each section in date order. Reproductions from the packing review;
tests/test_old_receipts.py replays version-3 packs of the same rows."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rms_duck.packing.pipeline import pack_candidates
from tests.conftest import independent_count, reader_kind, reader_lines
from tests.thorough import examples

PAIR = [
    {"id": "a", "score": 0.9, "content": "Storage costs 2,300 EUR a month.", "contradicts": ["b"]},
    {"id": "b", "score": 0.8, "content": "Storage costs 3,100 EUR a month."},
    {"id": "c", "score": 0.5, "content": "Jonas owns the egress rules."},
]


def test_a_larger_budget_never_empties_the_context():
    # Version 3 priced a's line as '[conflict]' but printed '[conflict c1]': at 72 tokens
    # assembly overshot, dropped a and left nothing, where 60 tokens had packed c.
    config = {"overhead_tokens": 0}
    first = None
    for budget in range(40, 120):
        bundle = pack_candidates(PAIR, budget=budget, config=config)
        assert bundle.tokens_used == independent_count("o200k_base", bundle.context)
        if bundle.included and first is None:
            first = budget
        if first is not None:
            assert bundle.included, budget


def test_compact_packs_a_pair_at_the_budget_it_needs():
    config = {"context_format": "compact", "overhead_tokens": 0}
    both = pack_candidates(PAIR[:2], budget=5000, config=config)
    needed = both.tokens_used
    assert pack_candidates(PAIR[:2], budget=needed, config=config).included_ids == ["a", "b"]


SENTENCES = ["Maya moved to Lisbon.", "She likes tea.", "Bob said hi.", "会議は火曜日です。"]
folding_rows = st.lists(st.fixed_dictionaries(
    {"id": st.sampled_from([f"n{i}" for i in range(8)]), "score": st.floats(0, 1),
     "content": st.lists(st.sampled_from(SENTENCES), min_size=1, max_size=3).map(" ".join),
     "evidence_ids": st.lists(st.sampled_from(["t1", "t2", "n0"]), min_size=1, max_size=2)},
    optional={"contradicts": st.lists(st.sampled_from([f"n{i}" for i in range(8)]), max_size=1),
              "pinned": st.booleans(), "speaker": st.sampled_from(["Maya", "Bob"]),
              "session_id": st.just("s"), "session_position": st.integers(0, 8),
              "event_time": st.sampled_from(["2026-01-01T00:00:00Z", "2026-01-02T10:00:00Z"])}),
    max_size=9, unique_by=lambda row: row["id"])


@settings(max_examples=examples(150), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(folding_rows, st.integers(60, 400),
       st.sampled_from([None, "adjacent", "trigger_tier"]))
def test_a_folded_record_is_shown_by_an_included_one(rows, budget, sessions):
    config = {"overhead_tokens": 0, "fold_repeated_text": True}
    if sessions:
        config["session_context_packing"] = sessions
    bundle = pack_candidates(rows, budget=budget, config=config)
    lines = reader_lines(bundle.context)
    for record in bundle.excluded:
        if record.reason.value == "FOLDED":
            text = next(r["content"] for r in rows if r["id"] == record.id)
            assert any(json.dumps(text, ensure_ascii=False)[1:-1] in line for line in lines
                       if reader_kind(line) == "record"), record.id


def _session_rows() -> list[dict]:
    """The adjacent-packing candidates of the version-3 fixture (a session window of two
    turns, four facts with and without dates), as its make.py packed them."""
    path = Path(__file__).parent / "data" / "receipts_v3_conflicts" / "rms_bundles.json"
    bundles = [json.loads(line) for line in path.read_text().splitlines()]
    return next(b["inputs"] for b in bundles if b["namespace_id"] == "adj")  # JSON column


def test_adjacent_session_packing_keeps_sections_in_date_order():
    rows = _session_rows()
    config = {"overhead_tokens": 0}
    tier = pack_candidates(rows, budget=4000, config={**config,
                                                         "session_context_packing": "trigger_tier"})
    needed = tier.tokens_used
    adjacent = pack_candidates(rows, budget=needed,
                               config={**config, "session_context_packing": "adjacent"})
    assert sorted(adjacent.included_ids) == sorted(tier.included_ids)
    lines = adjacent.context.splitlines()
    assert lines.count("2026") == 1 and lines.count("3 Nov") == 1
    assert lines.index("2025") < lines.index("2026")  # date order, not score order
    window = [line for line in lines if "cut-over." in line or "Sounds good" in line]
    assert lines.index(window[1]) == lines.index(window[0]) + 1  # the window stays together

"""The priced-line memo (packing/priced.py): remembered across packs, never stale, bounded."""

from __future__ import annotations

import random

import pytest
from hypothesis import assume, given, settings
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
    """The pack with every memo warm from earlier packs, and the same pack with the priced
    memo off and the render memos emptied: the context, the receipt and the bundle's row
    (its records' scores included). Off, not merely cold: a cold pack fills the memo as it
    goes and reads it back, so a wrong entry would show in both."""
    import unittest.mock

    from rms_duck.packing import selector

    warm = pack_candidates(rows, budget=budget, config=config)
    clear_render_memos()
    with unittest.mock.patch.object(selector, "remembered", lambda key: None), \
            unittest.mock.patch.object(selector, "remember", lambda key, value: None):
        off = pack_candidates(rows, budget=budget, config=config)
    return ((warm.context, warm.tokens_used, warm.receipt, repr(bundle_row(warm))),
            (off.context, off.tokens_used, off.receipt, repr(bundle_row(off))))


@given(st.integers(0, 10**6), st.integers(1, 40), st.sampled_from([120, 600, 4096]),
       st.sampled_from(FORMATS))
@settings(max_examples=examples(60), deadline=None)
def test_a_record_priced_before_with_other_fields_is_priced_afresh(seed, n, budget, config):
    """The same ids with other fields (speaker, tags, dates, text, conflicts, validity) in
    the next pack: the memo answers nothing it should not, so warm equals unmemoized."""
    ids = [f"n{i:03d}" for i in range(n)]
    pack_candidates(pool(seed, ids), budget=budget, config=config)  # warms the memo
    warm, off = both(pool(seed + 1, ids), budget, config)
    assert warm == off
    # The first pool again, every line of it remembered by now.
    pack_candidates(pool(seed, ids), budget=budget, config=config)
    warm, off = both(pool(seed, ids), budget, config)
    assert warm == off


# The fields _candidate() draws beside the text, each of which some format shows.
_BESIDE_TEXT = ("type", "paths", "pinned", "lifecycle_state", "epistemic_type", "source_type",
                "event_time", "valid_from", "valid_to", "speaker", "prose", "structured_value",
                "contradicts", "evidence_ids", "session_id", "session_position")


@given(st.integers(0, 10**6), st.integers(1, 40), st.sampled_from([120, 600, 4096]),
       st.sampled_from(FORMATS), st.sampled_from(_BESIDE_TEXT))
@settings(max_examples=examples(90), deadline=None)
def test_a_record_differing_in_one_field_beside_its_text_is_priced_afresh(seed, n, budget,
                                                                           config, field):
    """The same records with one field beside the text drawn again: a memo key that left
    that field out would answer with a stale line, date line or speaker run."""
    ids = [f"n{i:03d}" for i in range(n)]
    first = pool(seed, ids)
    pack_candidates(first, budget=budget, config=config)
    changed = []
    for row, other in zip(first, pool(seed + 1, ids), strict=True):
        row = {key: value for key, value in row.items() if key != field}
        if field in other:
            row[field] = other[field]
        changed.append(row)
    warm, off = both(changed, budget, config)
    assert warm == off


def rescored(rows: list[dict], seed: int) -> list[dict]:
    """The same rows ranked again: a new score, salience and confidence for each (a salience
    of 1.0 pins a record, a confidence moves a fact between sections and tiers)."""
    rng = random.Random(seed)
    return [{**row, "score": round(rng.random(), 4),
             "salience": rng.choice([round(rng.random(), 2), 1.0, 0.5]),
             "confidence": rng.choice([round(rng.random(), 2), 0.0, 0.5])} for row in rows]


@given(st.integers(0, 10**6), st.integers(1, 40), st.sampled_from([120, 600, 4096]),
       st.sampled_from(FORMATS))
@settings(max_examples=examples(60), deadline=None)
def test_a_record_ranked_again_with_other_floats_packs_as_if_cold(seed, n, budget, config):
    """The memos leave the floats out of their keys (formats/base.py, UNSHOWN_FIELDS): the
    same nodes with new scores, saliences and confidences, as the next request or a GROUP
    BY's next group ranks them, find their lines remembered, and the pack (tiers, sections,
    the scores the receipt and bundle show) is the cold pack's."""
    rows = pool(seed, [f"n{i:03d}" for i in range(n)])
    pack_candidates(rows, budget=budget, config=config)
    warm, off = both(rescored(rows, seed), budget, config)
    assert warm == off


def test_a_node_ranked_again_is_not_priced_again():
    """What the float-free key buys: packing the same nodes with other scores adds no entry
    to the memo (a key holding the score would add one per record and score)."""
    clear_render_memos()
    rows = pool(7, [f"n{i:03d}" for i in range(30)])
    pack_candidates(rows, budget=100_000)
    entries = len(priced._MEMO)
    assert entries >= 30
    for seed in range(3):
        pack_candidates(rescored(rows, seed), budget=100_000)
    assert len(priced._MEMO) == entries


def test_the_fields_left_out_of_the_key_are_the_floats_no_format_shows():
    """The key holds every other Candidate field, and the three left out are the floats."""
    from dataclasses import fields

    from rms_duck.formats.base import UNSHOWN_FIELDS, shown_fields
    from rms_duck.records import Candidate

    floats = {f.name for f in fields(Candidate) if f.type in ("float", float)}
    assert UNSHOWN_FIELDS == floats == {"score", "salience", "confidence"}
    c = Candidate(id="n1", score=0.25, content="text", salience=0.75, confidence=0.125)
    shown = shown_fields(c)
    assert len(shown) == len(fields(Candidate)) - 3
    assert not {0.25, 0.75, 0.125} & set(shown)


@given(st.integers(0, 10**6))
@settings(max_examples=examples(200), deadline=None)
def test_no_builtin_format_reads_the_floats(seed):
    """What the float-free key rests on: every built-in format (the frozen ones replays use
    too) gives a record the same line, date lines, speaker run and speaker flag whatever
    its score, salience and confidence, at every level its text exists."""
    from rms_duck.candidates import to_candidate
    from rms_duck.formats import FORMATS as NAMED
    from rms_duck.formats import LEGACY_FORMATS, RecordView
    from rms_duck.formats.base import is_builtin
    from rms_duck.packing.layout import dated, speaker_run
    from rms_duck.packing.represent import representation_text
    from rms_duck.records import Level

    rng = random.Random(seed)
    ids = [f"n{i}" for i in range(5)]
    row = _candidate(rng, ids[0], ids)
    one = to_candidate(row, 0)
    other = to_candidate(rescored([row], seed + 1)[0], 0)
    formats = [f for f in [*NAMED.values(), *LEGACY_FORMATS.values()] if is_builtin(f)]
    assert len(formats) >= 3 + 9
    for fmt in formats:
        for level in Level:
            texts = [representation_text(c, level) for c in (one, other)]
            if texts[0] is None or texts[0] != texts[1]:
                continue  # a level whose text shows a float is keyed by that text
            views = [RecordView(c, level, texts[0], "m3", ("n2",), ("c1",)) for c in (one, other)]
            shown = []
            for v in views:  # each rendered afresh: the memos would answer the second
                clear_render_memos()
                shown.append((fmt.record_line(v), dated(fmt, v), speaker_run(fmt, v),
                              fmt.shows_speaker(v)))
            assert shown[0] == shown[1], (fmt.name, level)


def test_an_equal_candidate_that_prints_apart_is_the_one_the_bundle_shows():
    """-0.0 == 0.0, so a candidate scored -0.0 finds the line a candidate scored 0.0 was
    priced with; the bundle must still show its own score (and its own object)."""
    from rms_duck.records import Candidate

    def rows(score: float) -> list[Candidate]:
        return [Candidate(id=f"n{i}", score=score, content=f"note {i}", speaker="Maya")
                for i in range(5)]

    pack_candidates(rows(0.0), budget=4096)
    mine = rows(-0.0)
    warm, off = both(mine, 4096, {})
    assert warm == off
    bundle = pack_candidates(mine, budget=4096)
    assert [str(r.score) for r in bundle.included] == ["-0.0"] * 5


def multi_path_pool(seed: int) -> list[dict]:
    """60 unpinned notes found by two paths: the balanced ordering reads each one's line."""
    return [{**row, "paths": ["LEXICAL", "VECTOR"], "pinned": False, "salience": 0.5,
             "type": "note"} for row in pool(seed, [f"n{i:03d}" for i in range(60)])]


@pytest.mark.parametrize("config", FORMATS)
def test_the_ordering_remembers_lines_alone_for_records_never_tried(config):
    """The case the property below needs, shown to occur in every format: a small budget
    leaves most multi-path records untried, their lines remembered alone."""
    clear_render_memos()
    bundle = pack_candidates(multi_path_pool(7), budget=400, config=config)
    assert bundle.included
    assert any(p.dates is priced.LINE_ONLY for p in priced._MEMO.values())


@given(st.integers(0, 10**6), st.sampled_from(FORMATS))
@settings(max_examples=examples(45), deadline=None)
def test_a_line_remembered_for_ordering_alone_is_priced_in_full_when_tried(seed, config):
    """The balanced ordering reads the line of every multi-path record and remembers the
    line alone (priced.LINE_ONLY); a later pack with room to try those records prices them
    in full, and packs as it would unmemoized. The memo's count of the text it holds stays
    exact as the entries are replaced."""
    rows = multi_path_pool(seed)
    clear_render_memos()
    pack_candidates(rows, budget=150, config=config)  # room for a few: most lines only
    # Some pools try every record at every level (nothing fits but a reference line, say),
    # which prices them all in full: those pools say nothing here.
    assume(any(p.dates is priced.LINE_ONLY for p in priced._MEMO.values()))
    pack_candidates(rows, budget=100_000, config=config)  # tries them: priced in full
    held = sum(len(p.view.text) + len(p.line) for p in priced._MEMO.values())
    assert held == priced._held[0]
    warm, off = both(rows, 100_000, config)
    assert warm == off


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


def test_the_render_memo_tells_apart_views_that_differ_in_any_field():
    """Every view field but the candidate's floats is in the render memo's key: rendering
    each combination of ref, conflicts, labels and speaker_above in turn, without emptying
    the memo, gives what the renderer gives afresh (review of round 25)."""
    import itertools

    from rms_duck.formats import FORMATS as NAMED
    from rms_duck.formats import LEGACY_FORMATS, RecordView
    from rms_duck.formats.base import is_builtin
    from rms_duck.records import Candidate, Level

    c = Candidate(id="n1", score=0.5, content="hello", speaker="Maya")
    clear_render_memos()
    for fmt in [f for f in [*NAMED.values(), *LEGACY_FORMATS.values()] if is_builtin(f)]:
        render = type(fmt).record_line.__wrapped__
        for ref, contradicts, above in itertools.product((None, "m2"), ((), ("n2",)),
                                                         (False, True)):
            labels = ("c1",) * len(contradicts) if fmt.labels_conflicts else ()
            view = RecordView(c, Level.FULL, "hello", ref, contradicts, labels, above)
            assert fmt.record_line(view) == render(fmt, view), (fmt.name, ref, above)

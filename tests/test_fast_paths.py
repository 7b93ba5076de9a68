"""The fast paths of issue 10 give the bytes the plain paths give.

- Early exit: once no remaining candidate can fit, the rest are decided in bulk; packing
  with the early exit switched off (every candidate tried in turn) gives the same context,
  receipt and decisions.
- The receipt text written from the frozen trace equals canonical JSON of the receipt body.
- The metadata line reserved while packing is priced as a sum of one term per conflict pair
  (packing/metacost.py): the sum is the tokenizer's count, and packs come out as they do
  when the whole line is counted each time.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from rms_duck.escape import canonical_json
from rms_duck.packing import pipeline
from rms_duck.packing.pipeline import pack_candidates
from tests.test_budget_properties import PROPERTY_SETTINGS, cases


def _never_exit(values: list[int]) -> list[int]:
    return [-(10**9)] * len(values)


@PROPERTY_SETTINGS
@given(cases)
def test_early_exit_and_sure_miss_skip_decide_as_trying_each_would(case):
    rows, budget, config = case
    fast = pack_candidates(rows, budget=budget, config=config)
    original = pipeline._suffix_minima
    pipeline._suffix_minima = _never_exit
    pipeline._SKIP_SURE_MISSES = False  # and try each sure miss one by one too
    try:
        slow = pack_candidates(rows, budget=budget, config=config)
    finally:
        pipeline._suffix_minima = original
        pipeline._SKIP_SURE_MISSES = True
    assert fast.context == slow.context
    assert fast.receipt == slow.receipt
    assert fast.excluded == slow.excluded


def _slow_pack(rows, budget, config):
    original = pipeline._suffix_minima
    pipeline._suffix_minima = _never_exit
    pipeline._SKIP_SURE_MISSES = False
    try:
        return pack_candidates(rows, budget=budget, config=config)
    finally:
        pipeline._suffix_minima = original
        pipeline._SKIP_SURE_MISSES = True


@pytest.mark.parametrize("budget", [700, 900, 1300])
@pytest.mark.parametrize("config", [{}, {"fold_repeated_text": False},
                                    {"representation_policy": "budget_fraction"}])
def test_records_passed_over_with_a_few_tokens_left_are_decided_as_trying_each_would(
        budget, config):
    """A pack that ends with a few tokens to spare passes over many short records between
    attempts; those whose decision reads nothing later attempts change are decided at the
    end. Conflict pairs and fold sources among them must still come out as trying each."""
    rows = []
    for i in range(400):
        row = {"id": f"n{i:03d}", "score": round(1 - i / 500, 4), "speaker": "Maya",
               "event_time": f"2026-{i % 12 + 1:02d}-{i % 27 + 1:02d}T{i % 24:02d}:00:00Z",
               "content": "ok" if i % 3 else f"note {i} about the budget review, at length"}
        if i % 17 == 0:
            row["contradicts"] = [f"n{(i + 5) % 400:03d}"]
        if i % 5 == 0:
            row["prose"] = f"a note on review {i}"  # a second level to try
        if i % 13 == 0:
            row["evidence_ids"] = ["t1"]
            row["content"] = "ok"
        rows.append(row)
    fast = pack_candidates(rows, budget=budget, config=config)
    slow = _slow_pack(rows, budget, config)
    assert fast.context == slow.context and fast.receipt == slow.receipt
    assert fast.excluded == slow.excluded


@PROPERTY_SETTINGS
@given(cases)
def test_receipt_text_is_canonical_json_of_the_body(case):
    rows, budget, config = case
    bundle = pack_candidates(rows, budget=budget, config=config)
    assert bundle.receipt == canonical_json(bundle.receipt_body)


def test_early_exit_lists_every_exhausted_candidate():
    rows = [{"id": f"n{i:04d}", "score": 1 - i / 2_000,
             "content": f"note {i} about the quarterly budget review and its many details"}
            for i in range(1_000)]
    bundle = pack_candidates(rows, budget=400)
    assert len(bundle.included) + len(bundle.excluded) == 1_000
    exhausted = [r for r in bundle.excluded if r.reason.value == "BUDGET_EXHAUSTED"]
    assert len(exhausted) == 1_000 - len(bundle.included)
    tried = {d.id: d.tried for d in bundle.decisions}
    assert all(tried[r.id] == ("full",) for r in exhausted)


@pytest.mark.parametrize("values,expected", [([], []), ([3, 1, 2], [1, 1, 2]),
                                             ([5, 6, 4], [4, 4, 4])])
def test_suffix_minima(values, expected):
    assert pipeline._suffix_minima(values) == expected


# -- columnar intake -------------------------------------------------------------------------

import pyarrow as pa  # noqa: E402
from hypothesis import assume, example  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from rms_duck.candidates import to_candidates  # noqa: E402
from rms_duck.columnar import intake  # noqa: E402
from rms_duck.errors import CandidateError  # noqa: E402
from tests.test_budget_properties import candidate_rows  # noqa: E402


def _both(rows):
    try:
        table = pa.Table.from_pylist(rows)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        assume(False)
    results = []
    for make in (lambda: to_candidates(table.to_pylist()), lambda: to_candidates(intake(table))):
        try:
            results.append(make())
        except CandidateError as exc:
            results.append(str(exc))
    return results


@PROPERTY_SETTINGS
@given(st.lists(candidate_rows, max_size=12))
def test_columnar_intake_builds_the_candidates_row_intake_builds(rows):
    by_rows, by_columns = _both(rows)
    assert by_columns == by_rows


BAD = [
    {"id": "a", "score": 1.5, "content": "x"},
    {"id": None, "score": 0.5, "content": "x"},
    {"id": "  padded ", "score": 0.5, "content": "x"},
    {"id": "A0000000-0000-4000-8000-00000000000F", "score": 0.5, "content": "x"},
    {"id": "b", "score": 0.5, "content": None},
    {"id": "c", "score": 0.5, "content": "x", "type": "bogus"},
    {"id": "d", "score": 0.5, "content": "x", "event_time": "not a time"},
    {"id": "e", "score": float("nan"), "content": "x"},
    {"id": "f", "score": 0.5, "content": "x", "path_count": -1},
    {"id": "g", "score": 0.5, "content": "x", "condition_state": "TRUE"},
    {"id": "h", "score": 0.5, "content": "x",
     "contradicts": ["A0000000-0000-4000-8000-00000000000F"]},
]


@pytest.mark.parametrize("bad", BAD, ids=[str(i) for i in range(len(BAD))])
def test_columnar_intake_hands_odd_rows_to_the_row_checks(bad):
    # Valid rows around it: the odd row is normalised, or rejected with the same message.
    good = {**dict.fromkeys(bad), "id": "z", "score": 0.25, "content": "fine"}
    by_rows, by_columns = _both([good, bad, good])
    assert by_columns == by_rows


def test_sql_pack_uses_the_columnar_intake_and_names_the_bad_row():
    import duckdb

    import rms_duck

    con = rms_duck.connect()
    with pytest.raises(duckdb.Error, match=r"candidate #1 \(id 'b'\): field 'score'"):
        con.execute("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'x'}, "
                    "{'id': 'b', 'score': 2.0, 'content': 'y'}], 4096)").fetchall()


@PROPERTY_SETTINGS
@given(st.lists(candidate_rows, max_size=12))
def test_stored_input_rows_are_canonical_json_of_each_candidate(rows):
    from rms_duck.escape import canonical_json
    from rms_duck.receipts import candidate_to_dict, inputs_json

    try:
        candidates = to_candidates(rows)
    except CandidateError:
        assume(False)
    expected = canonical_json(sorted((candidate_to_dict(c) for c in candidates),
                                     key=canonical_json))
    assert inputs_json(candidates) == expected


@PROPERTY_SETTINGS
@given(st.lists(candidate_rows, max_size=12))
def test_stored_inputs_read_back_to_the_same_candidates(rows):
    """Stored inputs leave out fields at their default; reading them back fills the same
    defaults in, so replay packs equal candidates."""
    import json

    from rms_duck.receipts import inputs_json

    try:
        candidates = to_candidates(rows)
    except CandidateError:
        assume(False)
    stored = json.loads(inputs_json(candidates))
    assert sorted(to_candidates(stored), key=repr) == sorted(candidates, key=repr)


def test_a_text_and_its_enum_member_store_alike():
    """Diff review: "note" and NodeType.NOTE compare equal, so they share a remembered row;
    both must then print the same row (both leave the default type out)."""
    from rms_duck.receipts import input_row_json, inputs_json
    from rms_duck.records import Candidate, NodeType

    as_text = Candidate(id="a", score=0.5, content="x", type="note")  # type: ignore[arg-type]
    as_enum = Candidate(id="a", score=0.5, content="x", type=NodeType.NOTE)
    assert input_row_json(as_text) == input_row_json(as_enum) == \
        '{"content":"x","id":"a","score":0.5}'
    assert inputs_json([as_enum]) == inputs_json([as_text])


def test_stored_inputs_leave_out_fields_at_their_default():
    import json

    from rms_duck.receipts import inputs_json

    rows = [{"id": "a", "score": 0.5, "content": "x", "salience": 0.5, "type": "note"},
            {"id": "b", "score": 0.25, "content": "y", "salience": 1, "pinned": True,
             "paths": ["LEXICAL"], "speaker": "Maya", "confidence": 0.0}]
    assert sorted(json.loads(inputs_json(to_candidates(rows))), key=lambda r: r["id"]) == [
        {"content": "x", "id": "a", "score": 0.5},
        {"confidence": 0.0, "content": "y", "id": "b", "paths": ["LEXICAL"], "pinned": True,
         "salience": 1.0, "score": 0.25, "speaker": "Maya"}]


def test_stored_input_rows_keep_negative_zero_and_enum_spellings():
    from rms_duck.escape import canonical_json
    from rms_duck.receipts import candidate_to_dict, input_row_json

    rows = [{"id": "a", "score": -0.0, "content": "x", "lifecycle_state": "deprecated",
             "epistemic_type": "deprecated", "confidence": 1e-7, "paths": ["P\u2028"]}]
    (c,) = to_candidates(rows)
    assert input_row_json(c) == canonical_json(candidate_to_dict(c))
    assert '"score":-0.0' in input_row_json(c)


def test_remembered_input_rows_never_share_text_between_equal_values_that_print_apart():
    """inputs_json remembers row texts by value; 1 == 1.0, -0.0 == 0.0 and one instant in
    two zones compare equal but print differently, so each must still get its own text."""
    from dataclasses import replace
    from datetime import UTC, datetime, timedelta, timezone

    from rms_duck.escape import canonical_json
    from rms_duck.receipts import candidate_to_dict, inputs_json

    (base,) = to_candidates([{"id": "a", "score": 0.5, "content": "x",
                              "event_time": datetime(2024, 1, 1, tzinfo=UTC)}])
    zone = timezone(timedelta(hours=2))
    variants = [base, replace(base, score=1.0), replace(base, score=1),
                replace(base, score=-0.0), replace(base, score=0.0), base, base,
                replace(base, confidence=1), replace(base, confidence=1.0),
                replace(base, salience=1), replace(base, salience=True),
                replace(base, salience=0.0), replace(base, salience=-0.0),
                replace(base, session_position=1), replace(base, session_position=True),
                replace(base, event_time=base.event_time.astimezone(zone))]
    for _ in range(2):  # the second round reads what the first remembered
        for c in variants:
            assert inputs_json([c]) == canonical_json([candidate_to_dict(c)])


# Values that compare equal but print apart (1 and 1.0, 0, 0.0 and -0.0), the default, and
# a few others: drawn often enough to follow one another in a row's rankings.
_UNIT = st.sampled_from([0.0, -0.0, 0, 0.5, 1.0, 1, True, 1e-7, 0.25])


@PROPERTY_SETTINGS
@given(st.one_of(st.lists(candidate_rows, min_size=1, max_size=6),
                 st.just([{"id": "a", "score": 0.5, "content": "x"}])),
       st.lists(st.tuples(_UNIT, _UNIT, _UNIT), min_size=1, max_size=6))
def test_stored_input_rows_of_rows_ranked_again_are_canonical_json(rows, floats):
    """inputs_json remembers a row without its floats and writes them in afresh: the same
    rows ranked again and again (each ranking a score, salience and confidence, repeated
    too) store exactly the canonical JSON of each candidate."""
    from dataclasses import replace

    from rms_duck.escape import canonical_json
    from rms_duck.receipts import candidate_to_dict, inputs_json

    try:
        candidates = to_candidates(rows)
    except CandidateError:
        assume(False)
    for score, salience, confidence in floats + floats[::-1]:
        ranked = [replace(c, score=score, salience=salience, confidence=confidence)
                  for c in candidates]
        expected = canonical_json(sorted((candidate_to_dict(c) for c in ranked),
                                         key=canonical_json))
        assert inputs_json(ranked) == expected


def test_the_receipt_memos_keep_no_long_text():
    """A pack's receipt and stored inputs remember short rows only: the digests, decision rows
    and input rows of a long record are written afresh (200 packs of a distinct 1 MB record
    kept 520 MB alive through these memos)."""
    from rms_duck import receipts
    from rms_duck.packing.pipeline import pack_candidates

    long_text = "word " * 2_000
    assert len(long_text) > receipts._REMEMBERED_CHARS
    long_id = "i" * (receipts._REMEMBERED_CHARS + 1)
    rows = [{"id": "long", "score": 0.5, "content": long_text},
            {"id": long_id, "score": 0.75, "content": "a note with a long id"},
            {"id": "short", "score": 0.25, "content": "a short note"}]
    bundle = pack_candidates(rows, budget=100_000)
    assert bundle.receipt and receipts.inputs_json(to_candidates(rows))
    held = [*receipts._DIGESTS, *(key[1] for key in receipts._DECISION_TEXTS),
            *(text for _, _, text in receipts._ROW_PARTS.values())]
    assert "a short note" in held and '"a short note"' in "".join(held)
    assert not any(long_text in text or long_id in text for text in held)
    assert not any(long_id in key[0] for key in receipts._DECISION_TEXTS)


def test_an_infinite_float_in_a_hand_built_candidate_stores_as_json_writes_it():
    """Validation refuses infinity, but a hand-built Candidate can hold one: its input row
    says Infinity, as json does, in a remembered row too (review of round 25)."""
    from rms_duck.escape import canonical_json
    from rms_duck.receipts import candidate_to_dict, inputs_json
    from rms_duck.records import Candidate

    for value in (float("inf"), 0.25, float("-inf")):
        c = Candidate(id="a", score=0.5, content="x", salience=value)
        assert inputs_json([c]) == canonical_json([candidate_to_dict(c)])


@pytest.mark.parametrize("pairs", [
    [(1.0, 0.0), (1.0, -0.0)], [(1.0, -0.0), (1.0, 0.0)],
    [(0.0, 0.5), (-0.0, 0.5)], [(-0.0, 0.5), (0.0, 0.5)],
    [(1.0, 1), (1.0, 1.0)], [(1, 0.5), (1.0, 0.5)], [(0.5, float("inf")), (0.5, 1.0)]])
def test_receipt_rows_written_again_with_equal_floats_that_print_apart(pairs):
    """Zeros of either sign and ints beside floats, as score and order key in turn: the
    second row of each pair must not reuse the first one's text."""
    from rms_duck.escape import canonical_json
    from rms_duck.receipts import candidates_json, decision_to_dict, has_content
    from rms_duck.records import Decision
    from rms_duck.sha import sha256_text

    for score, key in pairs * 2:
        row = ("pair", score, "x", "user_stated", "asserted", True, 3, key, ("full",), None,
               0, "BUDGET_EXHAUSTED", None)
        decision = Decision(id="pair", score=score, content_sha256=sha256_text("x"), tier=3,
                            order_key=key, tried=("full",), chosen=None, tokens=0,
                            decision="excluded", reason="BUDGET_EXHAUSTED", position=None,
                            source_type="user_stated", epistemic="asserted",
                            has_content=has_content(None, True))
        assert candidates_json([row]) == canonical_json([decision_to_dict(decision)])


def test_a_decision_row_cut_around_its_floats_is_the_whole_row():
    from rms_duck import receipts

    assert receipts._ROW == (receipts._ROW_HEAD + "%s" + receipts._ROW_MIDDLE + "%s"
                             + receipts._ROW_TAIL)


@PROPERTY_SETTINGS
@given(st.lists(st.tuples(st.sampled_from([0.0, -0.0, 0, 1, 1.0, 0.5, 0.25, True]),
                          st.sampled_from([None, float("inf"), 0.0, -0.0, 0, 1, 1.0, 0.5])),
                min_size=1, max_size=8))
def test_receipt_rows_of_decisions_ranked_again_are_canonical_json(floats):
    """candidates_json remembers a decision row without its score and order_key and writes
    them in afresh: the same decisions with other scores and order keys, repeated, equal
    zeros and ints among them, give exactly canonical_json of decision_to_dict."""
    from rms_duck.escape import canonical_json
    from rms_duck.receipts import candidates_json, decision_to_dict, has_content
    from rms_duck.records import Decision
    from rms_duck.sha import sha256_text

    for score, key in floats + floats[::-1]:
        trace = [  # bundle.TraceRow: an excluded row and a packed one
            ("a", score, "x", "user_stated", "asserted", True, 4, key, ("full",), None, 0,
             "BUDGET_EXHAUSTED", None),
            ("b", score, "y", "user_stated", "asserted", True, 3, key, ("full",), "full", 5,
             None, 1)]
        decisions = [
            Decision(id=cid, score=s, content_sha256=sha256_text(content), tier=tier,
                     order_key=k, tried=tried, chosen=chosen, tokens=tokens,
                     decision="excluded" if chosen is None else "included", reason=reason,
                     position=position, source_type=source, epistemic=epistemic,
                     has_content=has_content(chosen, has_text))
            for (cid, s, content, source, epistemic, has_text, tier, k, tried, chosen, tokens,
                 reason, position) in trace]
        assert candidates_json(trace) == canonical_json([decision_to_dict(d) for d in decisions])


@given(st.one_of(st.integers(), st.text(), st.none(), st.booleans(), st.just([]),
                 st.just(()), st.lists(st.integers(), max_size=2), st.floats(allow_nan=False)))
def test_canonical_json_shortcuts_write_what_json_dumps_writes(value):
    import json

    from rms_duck.escape import canonical_json, harden

    assert canonical_json(value) == harden(json.dumps(
        value, ensure_ascii=False, separators=(",", ":"), sort_keys=True))


@given(st.integers(0, 10**9), st.integers(1, 10**9), st.integers(0, 10**6))
def test_metadata_line_shortcut_writes_what_json_compact_writes(used, budget, excluded):
    from rms_duck.escape import json_compact
    from rms_duck.formats.metadata import metadata_line

    body = {"tokens_used": used, "context_budget": budget, "conflicts": [],
            "excluded_count": excluded}
    assert metadata_line(tokens_used=used, budget=budget, conflicts=[],
                         excluded_count=excluded) == "[metadata] " + json_compact(body)
    from rms_duck.formats.metadata import short_metadata_line

    del body["conflicts"]
    assert short_metadata_line(tokens_used=used, budget=budget, conflicts=[],
                               excluded_count=excluded) == "[metadata] " + json_compact(body)


def test_remembered_decision_rows_follow_every_field_a_row_shows():
    """The receipt's candidate rows are remembered by what they show: the same id, text and
    score with another source_type or epistemic_type must not reuse the first row's text."""
    base = {"id": "a", "score": 0.5, "content": "the launch moved to June"}
    for extra in ({}, {"source_type": "system_inferred"}, {"epistemic_type": "hypothetical"},
                  {}):
        bundle = pack_candidates([{**base, **extra}], budget=4096)
        assert bundle.receipt == canonical_json(bundle.receipt_body)


from datetime import UTC, timedelta, timezone  # noqa: E402

_ZONES = st.sampled_from([None, UTC, timezone(timedelta(hours=5, minutes=30)),
                          timezone(timedelta(hours=-8))])
_TIME_TEXTS = st.one_of(
    st.datetimes(timezones=_ZONES).map(lambda d: d.isoformat(sep=" ")),
    st.datetimes(timezones=_ZONES).map(lambda d: d.isoformat()),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
    st.dates().map(lambda d: d.isoformat()),
    st.sampled_from(["2023-01-05 12:34:00+00", " 2023-01-05T12:34:00Z ", "2023-01-05T12:34Z",
                     "2023-01-05 12:34:00.5+05:30", "20230105", "not a time", "", "2023-13-01",
                     # review: 'Z' as the date-time separator (the row path's replace() breaks
                     # it) and offsets that overflow on conversion to UTC
                     "2023-01-05Z12:00", "2023-W01-3Z12:00Z", "20230105Z123456Z",
                     "0001-01-01T00:00:00+05:00", "9999-12-31T23:59:59-05:00"]))


@PROPERTY_SETTINGS
@given(st.lists(_TIME_TEXTS, min_size=1, max_size=6))
@example(["2023-01-05Z12:00"])
@example(["0001-01-01T00:00:00+05:00"])
def test_columnar_intake_reads_time_text_as_the_row_checks_do(times):
    """SQL hands times over as text; the columnar shortcut for text that fromisoformat()
    takes as it is must give the datetimes (or the error) the row checks give."""
    rows = [{"id": f"n{i}", "score": 0.5, "content": "x", "event_time": t, "valid_to": t}
            for i, t in enumerate(times)]
    # After a row with an error of its own, whose message must still come first.
    for lead in ([], [{"id": "first", "score": 1.5, "content": "x"}]):
        by_rows, by_columns = _both(lead + rows)
        # repr, not ==: equal instants in different zones compare equal but print apart.
        assert repr(by_columns) == repr(by_rows)


@given(st.text())
@example("line\u2028break")
@example("next\u0085line")
@example("lone \ud800 surrogate")
@example("plain ascii")
def test_harden_escapes_exactly_what_the_pattern_names(text):
    import json

    from rms_duck.escape import _EXTRA, _escape_match, harden

    encoded = json.dumps(text, ensure_ascii=False)
    assert harden(encoded) == _EXTRA.sub(_escape_match, encoded)


def test_packs_without_a_config_share_one_frozen_default():
    import dataclasses

    from rms_duck.config import PackingConfig, parse_config

    shared = parse_config(None)
    assert shared is parse_config(None) and shared == PackingConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        shared.overhead_tokens = 0  # type: ignore[misc]
    first = pack_candidates([{"id": "a", "score": 0.5, "content": "x"}], budget=300)
    assert first.config is shared
    assert first.receipt == pack_candidates([{"id": "a", "score": 0.5, "content": "x"}],
                                            budget=300, config=PackingConfig()).receipt


# -- the metadata line's cost, summed per conflict item ---------------------------------------

from rms_duck.formats import get_format  # noqa: E402
from rms_duck.packing import metacost  # noqa: E402
from rms_duck.tokens.counter import LineCounter, count_tokens  # noqa: E402

# Ids whose edges the per-item sum covers, and ids it must leave to a whole count: quotes,
# marks, non-ASCII letters, apostrophes, slashes and spaces at or near an edge. Counted
# per item, "x+" (o200k_base) and "x." or "_x" (cl100k_base) would be off by a token.
EDGE_IDS = ["n1", "n22", "A9", "7", "123456", "c12", "x'll", "it's", "a b", 'a"b1', "1,2",
            "a/b", "x+", "_x", "x.", ":x", "x-", "-x", "/x", "é1", "1é", "東京", "x\u0301",
            "\u0301x", "a\\b", "'s", "x'", "x ", "a\n", "🙂", "x🙂y"]
edge_ids = st.one_of(st.sampled_from(EDGE_IDS), st.text(min_size=1, max_size=6))
BUILT_IN_FORMATS = ["reader", "compact", "auditable", "reader@1", "reader@2", "reader@3",
                    "reader@5", "compact@1", "compact@5"]


def _listed(fmt, pairs, widest_label, numbers):
    shown = ([widest_label] * len(pairs) if fmt.labels_conflicts
             else [list(pair) for pair in sorted(pairs)])
    budget, available, excluded = numbers
    return fmt.metadata_line(tokens_used=available, budget=budget, conflicts=shown,
                             excluded_count=excluded)


@PROPERTY_SETTINGS
@example("auditable", "o200k_base", [("a1", "x+"), ("b2", "c3")], 9, (100, 50, 3))
@example("auditable", "cl100k_base", [("a1", "x."), ("_x", "b2")], 9, (100, 50, 3))
@given(st.sampled_from(BUILT_IN_FORMATS), st.sampled_from(["o200k_base", "cl100k_base"]),
       st.lists(st.tuples(edge_ids, edge_ids), max_size=12), st.integers(1, 10**6),
       st.tuples(st.integers(1, 2**31 - 1), st.integers(0, 2**31 - 1), st.integers(0, 10**6)))
def test_metadata_line_costs_what_its_per_item_sum_says(name, encoding, pairs, pool, numbers):
    """The sum (packing/metacost.py) is the tokenizer's count of the whole line for every
    built-in format, whatever pairs are added, taken out or asked about."""
    fmt = get_format(name)
    budget, available, excluded = numbers
    widest = f"c{pool}"
    cost = metacost.metadata_cost(fmt, LineCounter(encoding), budget=budget,
                                  available=available, excluded_count=excluded,
                                  widest_label=widest)
    pairs = list(dict.fromkeys(tuple(sorted(pair)) for pair in pairs if pair[0] != pair[1]))

    def count(listed):
        return count_tokens(_listed(fmt, listed, widest, numbers) + "\n", encoding)

    for i, pair in enumerate(pairs):
        assert cost.cost(pairs[i:i + 2]) == count(pairs[:i + 2])
        cost.add([pair])
        assert cost.cost() == count(pairs[:i + 1])
    for i, pair in enumerate(pairs):
        cost.remove([pair])
        assert cost.cost() == count(pairs[i + 1:])


POOL_IDS = EDGE_IDS[:22]  # candidate ids as given (no edge space or line break)
words = st.lists(st.sampled_from(["note", "the budget", "moved", "to Tuesday", "東京", "12"]),
                 min_size=1, max_size=6).map(" ".join)
conflict_rows = st.fixed_dictionaries(
    {"id": st.sampled_from(POOL_IDS), "score": st.floats(0, 1), "content": words},
    optional={"contradicts": st.lists(st.sampled_from(POOL_IDS), max_size=4),
              "pinned": st.booleans(), "prose": words,
              "session_id": st.just("s"), "session_position": st.integers(0, 30)},
)


@PROPERTY_SETTINGS
@given(st.lists(conflict_rows, max_size=30), st.integers(60, 1500),
       st.sampled_from(BUILT_IN_FORMATS), st.sampled_from(["o200k_base", "cl100k_base"]),
       st.sampled_from([None, "trigger_tier", "adjacent"]))
def test_per_item_metadata_cost_packs_the_bytes_whole_counts_pack(rows, budget, name, encoding,
                                                                 session):
    config = {"context_format": name, "encoding": encoding, "overhead_tokens": 0,
              "session_context_packing": session}
    fast = pack_candidates(rows, budget=budget, config=config)
    metacost._BY_UNITS = False  # render and count the whole line every time
    try:
        slow = pack_candidates(rows, budget=budget, config=config)
    finally:
        metacost._BY_UNITS = True
    assert fast.context == slow.context and fast.tokens_used == slow.tokens_used
    assert fast.receipt == slow.receipt


def test_each_path_checks_a_candidate_once(monkeypatch):
    """A SQL pack, rms_store and rms_duck.pack check their rows before packing; the packer
    takes the checked list as it is rather than check every Candidate a second time."""
    import pyarrow as pa

    import rms_duck
    from rms_duck import candidates as module

    checked: list[str] = []
    real = module._without_nan

    def counted(candidate, index):
        checked.append(candidate.id)
        return real(candidate, index)

    monkeypatch.setattr(module, "_without_nan", counted)
    con = rms_duck.connect()
    rows = [{"id": f"r{i}", "score": 0.5, "content": f"text {i}"} for i in range(5)]
    table = pa.Table.from_pylist(rows)
    con.register("pool", table)
    sql_list = "list({'id': id, 'score': score, 'content': content})"
    for call in (lambda: con.execute(f"SELECT pack_context({sql_list}, 4096) FROM pool"),
                 lambda: con.execute(f"SELECT rms_store({sql_list}, 4096) FROM pool"),
                 lambda: rms_duck.pack(con, table, budget=4096)):
        checked.clear()
        call()
        assert sorted(checked) == sorted(r["id"] for r in rows)
    # A list a caller builds is checked whole, however it was made.
    from rms_duck.candidates import to_candidates
    from rms_duck.records import Candidate
    mine = to_candidates(rows) + [Candidate(id="nan", score=float("nan"), content="x")]
    with pytest.raises(rms_duck.errors.CandidateError, match="field 'score'"):
        pack_candidates(mine, budget=4096)


def test_the_selectors_usual_tier_shortcut_gives_tier_of():
    """Selector spells out tier_of()'s answer for a candidate with one path, no pin and no
    task; over every mix of the fields tier_of reads, both say the same tier."""
    import itertools

    from rms_duck.config import parse_config
    from rms_duck.packing.metacost import metadata_cost
    from rms_duck.packing.selector import Selector, tier_of
    from rms_duck.records import Candidate, Lifecycle, NodeType
    from rms_duck.tokens.counter import LineCounter

    grid = itertools.product(
        (False, True), (0.5, 1.0), (NodeType.NOTE, NodeType.TASK),
        (Lifecycle.TENTATIVE, Lifecycle.ARCHIVED),
        ((), ("VECTOR",), ("EPISODE_CONTEXT",), ("EVIDENCE_CONTEXT",), ("SESSION_CONTEXT",),
         ("VECTOR", "LEXICAL"), ("VECTOR", "VECTOR"), ("VECTOR", "SESSION_CONTEXT"),
         # Hand-built Candidates take any collection as they are: tier_of reads them all.
         {"EPISODE_CONTEXT"}, frozenset({"VECTOR"}), ["EVIDENCE_CONTEXT"], {"VECTOR": 1}),
        (None, 1, 2))
    pool = [Candidate(id=f"c{i:04}", score=0.5, content="x", pinned=pinned, salience=salience,
                      type=kind, lifecycle_state=state, paths=paths, path_count=count)
            for i, (pinned, salience, kind, state, paths, count) in enumerate(grid)]
    for session in (None, "adjacent"):
        config = parse_config({"session_context_packing": session} if session else None)
        counter = LineCounter(config.encoding)
        selector = Selector(pool, available=1000, config=config, counter=counter,
                            metadata=metadata_cost(config.format, counter, budget=1100,
                                                   available=1000, excluded_count=len(pool),
                                                   widest_label="c1"),
                            conflicts={})
        for c in pool:
            assert selector.outcomes[c.id].tier is tier_of(c, session is not None), c
            assert c in selector.by_tier[selector.outcomes[c.id].tier]

"""Dict rows built by code written for their shape (dictrows.py) equal what to_candidate()
builds, value and type, and every row it does not take goes to to_candidate() unchanged."""

from __future__ import annotations

import math
import uuid
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from rms_duck import dictrows
from rms_duck.candidates import _SLOTS, to_candidate, to_candidates
from rms_duck.errors import CandidateError
from rms_duck.records import Candidate, NodeType
from tests.test_budget_properties import PROPERTY_SETTINGS, candidate_rows

_FIELDS = [name for name, _ in _SLOTS]
_UUID = "a0000000-0000-4000-8000-00000000000f"
# Values each field may meet: final ones, ones to_candidate() normalises, ones it rejects.
_ODD_VALUES = [
    None, 0, 1, -1, 2**40, True, False, 0.5, -0.0, 1.5, math.nan, math.inf, "", " ", "x",
    " padded ", "0.5", "note", "NOTE", " fact ", "true", "TRUE", "unknown", _UUID,
    _UUID.upper(), b"\x00" * 16, [], [None], ["LEXICAL", None], ["VECTOR"], ("GRAPH",),
    [1, 2], [_UUID], {"k": 1}, NodeType.FACT, datetime(2024, 1, 2, tzinfo=UTC),
    datetime(2024, 1, 2), datetime(2024, 1, 2, tzinfo=timezone(timedelta(hours=2))),
    "2024-01-02T03:04:05Z", "infinity", "Alice", "  Bob  ",
]
_ODD = st.sampled_from(_ODD_VALUES)
odd_rows = st.builds(
    lambda base, extra: {**base, **extra},
    candidate_rows,
    st.dictionaries(st.sampled_from([*_FIELDS, "ID", "Score", "unrelated"]), _ODD, max_size=4),
)


def _shown(candidate: Candidate) -> list[tuple[type, str]]:
    """Each field's type and repr: equality alone would take 'note' for NodeType.NOTE and
    0.0 for -0.0."""
    return [(type(getattr(candidate, f)), repr(getattr(candidate, f))) for f in _FIELDS]


def _row_by_row(rows):
    try:
        return [to_candidate(row, i) for i, row in enumerate(rows)]
    except CandidateError as exc:
        return str(exc)


@PROPERTY_SETTINGS
@given(odd_rows)
@example({"id": "n1", "score": -0.0, "content": "x", "speaker": "   "})
@example({"id": "n1", "score": 0.5, "content": "x", "paths": ["LEXICAL", None]})
@example({"id": _UUID.upper(), "score": 0.5, "content": "x"})
@example({"id": "n1", "score": 0.5, "content": "x", "type": NodeType.FACT})
def test_a_shape_builder_builds_what_to_candidate_builds_or_declines(row):
    built = dictrows._write_builder(tuple(row))(row)
    if built is None:
        return  # declined: to_candidate() decides, as the next test shows
    assert _shown(built) == _shown(to_candidate(row))


@PROPERTY_SETTINGS
@given(st.lists(odd_rows, max_size=10))
def test_to_candidates_gives_the_row_by_row_result_or_error(rows):
    _assert_row_by_row(rows)


def _assert_row_by_row(rows) -> None:
    """to_candidates(rows) gives what to_candidate() gives row by row: values or the error."""
    expected = _row_by_row(rows)
    try:
        got = to_candidates(rows)
    except CandidateError as exc:
        assert str(exc) == expected
        return
    assert not isinstance(expected, str)
    assert [_shown(c) for c in got] == [_shown(c) for c in expected]


@pytest.mark.parametrize("field", _FIELDS)
def test_each_odd_value_of_a_field_is_built_alike_or_declined(field):
    base = {"id": "n1", "score": 0.5, "content": "x"}
    for value in _ODD_VALUES:
        row = {**base, field: value}
        built = dictrows._write_builder(tuple(row))(row)
        try:
            expected = to_candidate(row)
        except CandidateError:
            assert built is None, (field, value)
            continue
        assert built is None or _shown(built) == _shown(expected), (field, value)


def test_final_rows_are_built_by_the_shape_builder():
    rows = [{"id": f"n{i}", "score": 0.5, "content": "text", "type": "fact",
             "paths": ["LEXICAL"], "event_time": datetime(2024, 1, 2, tzinfo=UTC)}
            for i in range(5)]
    reader = dictrows.ShapeReader()
    out = [reader.candidate(row) for row in rows]
    assert all(type(c) is Candidate for c in out)
    assert out[0].type is NodeType.FACT and out[0].paths == ("LEXICAL",)


def test_rows_to_normalise_are_left_for_to_candidate():
    rows = [{"id": _UUID.upper(), "score": 1, "content": "text"},
            {"id": "n1", "score": 0.5, "content": "text", "type": "NOTE"},
            {"id": "n2", "score": 0.5, "content": "text", "structured_value": {"k": 1}}]
    reader = dictrows.ShapeReader()
    assert [reader.candidate(row) for row in rows] == [None, None, None]
    assert [c.id for c in to_candidates(rows)] == [_UUID, "n1", "n2"]


def test_canonical_ids_are_remembered_and_no_other_spelling_joins_them(monkeypatch):
    monkeypatch.setattr(dictrows, "_CANONICAL_IDS_LIMIT", 4)
    dictrows._CANONICAL_IDS.clear()
    ids = [str(uuid.UUID(int=(i + 1) * 0xABCDEF0123456789)) for i in range(10)]
    reader = dictrows.ShapeReader()
    built = [reader.candidate({"id": i, "score": 0.5, "content": "x"}) for i in ids * 2]
    assert [c.id for c in built] == ids * 2  # remembered or not, each is built alike
    assert 0 < len(dictrows._CANONICAL_IDS) <= 4 and dictrows._CANONICAL_IDS <= set(ids)
    # The upper-case spelling of a remembered id is still left to to_candidate to lower.
    remembered = next(iter(dictrows._CANONICAL_IDS))
    row = {"id": remembered.upper(), "score": 0.5, "content": "x"}
    assert reader.candidate(row) is None
    assert to_candidates([row])[0].id == remembered


def test_a_call_writes_a_bounded_number_of_new_shape_builders():
    dictrows._builders.clear()
    rows = [{"id": f"n{i}", "score": 0.5, "content": "text", f"extra{i}": i} for i in range(30)]
    out = to_candidates(rows)
    assert [c.id for c in out] == [f"n{i}" for i in range(30)]
    assert len(dictrows._builders) == dictrows.NEW_SHAPES_PER_CALL


def test_the_shape_cache_is_emptied_when_full():
    dictrows._builders.clear()
    for start in range(0, dictrows.MAX_SHAPES + 8, 8):
        to_candidates([{"id": "n", "score": 0.5, "content": "x", f"k{j}": 1}
                       for j in range(start, start + 8)])
    assert 0 < len(dictrows._builders) <= dictrows.MAX_SHAPES


def test_a_bad_row_after_good_ones_names_its_own_index():
    rows = [{"id": "n1", "score": 0.5, "content": "x"}] * 3 + [
        {"id": "n4", "score": 2.0, "content": "x"}]
    try:
        to_candidates(rows)
    except CandidateError as exc:
        assert str(exc).startswith("candidate #3 (id 'n4'): field 'score'")
    else:
        raise AssertionError("a score of 2.0 was accepted")


def test_rows_are_read_as_they_arrive_so_a_reused_dict_packs_each_of_its_states():
    # From the review of this change: reading the whole iterable first packed the last
    # state three times.
    def reused():
        row = {}
        for i in range(3):
            row.update(id=f"n{i}", score=0.5, content=f"text {i}")
            yield row

    assert [c.id for c in to_candidates(reused())] == ["n0", "n1", "n2"]


def test_a_bad_row_is_reported_before_the_rest_of_the_input_is_read():
    def source():
        yield {"id": "a", "score": 2.0, "content": "x"}
        raise ValueError("the source broke")

    try:
        to_candidates(source())
    except CandidateError as exc:
        assert "candidate #0" in str(exc) and "'score'" in str(exc)
    else:
        raise AssertionError("a score of 2.0 was accepted")


class _Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr")


def test_other_keys_are_ignored_however_they_print():
    for odd in (10**5000, _Unprintable(), "k" * 100_000):
        row = {"id": "a", "score": 0.5, "content": "x", odd: 1}
        assert _shown(to_candidates([row])[0]) == _shown(to_candidate(row))


def test_a_row_that_loses_a_key_while_read_goes_to_the_general_checks():
    row: dict = {"id": "a", "score": 0.5, "content": "x", "speaker": "Ana"}

    class Thief:
        armed = False

        def __hash__(self) -> int:
            if self.armed:
                row.pop("speaker", None)  # hashing the shape's keys changes the row
            return 7

    thief = Thief()
    row[thief] = 1
    thief.armed = True
    dictrows._builders.clear()
    got = to_candidates([row])[0]
    assert got.speaker is None and _shown(got) == _shown(to_candidate(row))


@pytest.mark.parametrize("swap", [("speaker", "speakr"), ("score", "scroe"), ("prose", 7),
                                  ("content", "Content")])
def test_a_row_of_the_same_size_as_the_last_but_other_keys_is_read_by_its_own_keys(swap):
    """ShapeReader sends a row with as many keys as the last all-field shape straight to that
    shape's builder, which must then fail on the missing key: a row of equal size with one
    key swapped for another gives what to_candidate() gives, value or error."""
    full = {name: None for name, _ in _SLOTS} | {"id": "n1", "score": 0.5, "content": "x"}
    old, new = swap
    other = {(new if key == old else key): value for key, value in full.items()}
    other["id"] = "n2"
    assert len(other) == len(full)
    _assert_row_by_row([full, other])

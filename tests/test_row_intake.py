"""The row intake (candidates.to_candidate) checks the optional fields a row sets in one
fixed order, found in one pass over the row, and builds the Candidate with a written-out
builder per set of given fields. These tests pin what that must not change: the result and
the first error do not depend on the order of the row's keys, the first error is the first
bad field in the documented order, and the builder makes what Candidate(**values) makes.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rms_duck.candidates import _OPTIONAL, _new_candidate, to_candidate
from rms_duck.errors import CandidateError
from rms_duck.records import Candidate, NodeType
from tests.test_budget_properties import PROPERTY_SETTINGS, candidate_rows

FIELDS = ["type", "paths", "path_count", "salience", "pinned", "confidence", "epistemic_type",
          "source_type", "lifecycle_state", "namespace_id", "event_time", "valid_from",
          "valid_to", "superseded_by", "speaker", "evidence_ids", "structured_value", "prose",
          "contradicts", "session_id", "session_position", "condition_state",
          "token_cost_estimate", "not_a_field"]

# Good and bad values alike: most rows drawn from this fail, which is the point.
any_value = st.one_of(
    st.none(), st.text(max_size=6), st.integers(-2, 30), st.floats(allow_nan=True),
    st.booleans(), st.lists(st.one_of(st.none(), st.text(max_size=3), st.integers()), max_size=3),
    st.sampled_from(["FACT", " task ", "observed", "Stable", "2023-01-05T12:00:00+05:00",
                     "0001-01-01T00:00:00+05:00", "TRUE", '{"a": 1}', "[1", "  ",
                     "A0000000-0000-4000-8000-00000000000F", datetime(2023, 1, 1, tzinfo=UTC),
                     datetime(2023, 1, 1), date(2020, 2, 2), Decimal("0.5")]),
)
rows = st.dictionaries(st.sampled_from(FIELDS), any_value, max_size=10).map(
    lambda extra: {"id": "x", "score": 0.5, "content": "c", **extra})


def _outcome(row):
    try:
        return to_candidate(row)
    except CandidateError as exc:
        return str(exc)


@PROPERTY_SETTINGS
@given(st.one_of(rows, candidate_rows), st.randoms(use_true_random=False))
def test_result_and_first_error_do_not_depend_on_key_order(row, rnd):
    items = list(row.items())
    rnd.shuffle(items)
    assert _outcome(dict(items)) == _outcome(row)


def test_the_first_bad_field_in_the_documented_order_is_reported():
    bad = {"type": "bogus", "event_time": "not a time", "salience": 2.0, "pinned": "yes",
           "speaker": None, "structured_value": "[1", "session_position": "three"}
    order = [name for name, _ in _OPTIONAL if name in bad and bad[name] is not None]
    keys = list(bad)
    for seed in range(20):
        random.Random(seed).shuffle(keys)
        row = {"id": "x", "score": 0.5, "content": "c", **{k: bad[k] for k in keys}}
        for expected in order:
            with pytest.raises(CandidateError, match=f"field '{expected}'"):
                to_candidate(row)
            del row[expected]
        assert to_candidate(row).id == "x"


normalised = st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=5), "score": st.floats(0, 1),
     "content": st.text(max_size=5)},
    optional={
        "type": st.sampled_from(list(NodeType)), "paths": st.lists(st.text(max_size=3)).map(tuple),
        "path_count": st.integers(0, 5), "salience": st.floats(0, 1), "pinned": st.booleans(),
        "event_time": st.datetimes(timezones=st.just(UTC)), "speaker": st.text(max_size=4),
        "contradicts": st.lists(st.text(max_size=3), max_size=2).map(tuple),
        "structured_value": st.text(max_size=5), "session_position": st.integers(0, 9),
        "condition_state": st.sampled_from(["true", "false", "unknown"]),
    })


@PROPERTY_SETTINGS
@given(normalised)
def test_the_builder_makes_what_the_dataclass_init_makes(values):
    built = _new_candidate(values)
    assert built == Candidate(**values)
    for name, field in Candidate.__dataclass_fields__.items():
        assert getattr(built, name) is values.get(name, field.default)


def test_a_built_candidate_is_a_frozen_candidate_like_any_other():
    import copy
    import dataclasses
    import pickle

    values = {"id": "x", "score": 0.5, "content": "c", "speaker": "Ana"}
    built = _new_candidate(values)
    assert type(built) is Candidate and isinstance(built, Candidate)
    assert hash(built) == hash(Candidate(**values))
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.score = 0.9  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(built)) == built == copy.copy(built)
    assert dataclasses.replace(built, score=0.25).score == 0.25


def test_absent_and_null_fields_take_the_defaults():
    plain = to_candidate({"id": "x", "score": 0.5, "content": "c"})
    nulls = to_candidate({"id": "x", "score": 0.5, "content": "c", **dict.fromkeys(FIELDS)})
    assert plain == nulls == Candidate(id="x", score=0.5, content="c")
    assert plain.type is NodeType.NOTE and plain.paths == () and plain.path_count is None


class _AnyCase(Mapping):
    """A Mapping whose get() finds a key in any case (as a case-insensitive row type does)."""

    def __init__(self, data):
        self._data = dict(data)

    def __getitem__(self, key):
        for name, value in self._data.items():
            if name.lower() == str(key).lower():
                return value
        raise KeyError(key)

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


def test_a_mapping_is_read_the_way_its_get_finds_the_fields():
    row = _AnyCase({"ID": "x", "Score": 0.5, "Content": "c", "Type": "fact", "Pinned": True})
    made = to_candidate(row)
    assert (made.id, made.type, made.pinned) == ("x", NodeType.FACT, True)


def test_a_hand_built_candidate_with_list_fields_still_hashes_and_packs():
    """Candidate.__hash__ hashes paths and path_count since 9dbc984; a Candidate built by
    hand with a list for paths (the dataclass does not convert it) raised "unhashable type:
    'list'" from pack_candidates, which packed it before. Equal candidates still hash alike,
    and -0.0 and 0.0 scores (equal) hash alike."""
    from rms_duck.packing.pipeline import pack_candidates

    listed = Candidate(id="a", score=0.5, content="hello there", paths=["VECTOR"])
    assert hash(listed) == hash(Candidate(id="a", score=0.5, content="hello there",
                                          paths=["VECTOR"]))
    as_tuple = Candidate(id="a", score=0.5, content="hello there", paths=("VECTOR",))
    assert pack_candidates([listed], budget=300).context == \
        pack_candidates([as_tuple], budget=300).context
    zero, negative = (Candidate(id="z", score=s, content="c") for s in (0.0, -0.0))
    assert zero == negative and hash(zero) == hash(negative)

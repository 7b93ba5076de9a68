"""The per-bundle shortcuts of a GROUP BY's small packs build the values the plain code
builds: records filled as unfrozen twins, receipt objects joined from remembered key orders.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from rms_duck.escape import canonical_json
from rms_duck.packing.pipeline import pack_candidates
from rms_duck.receipts import join_fragments
from rms_duck.records import IncludedRecord


def _rows(n: int) -> list[dict]:
    return [{"id": f"n{i}", "score": 1 - i / 10, "content": f"fact number {i}",
             "contradicts": ["n0"] if i == 3 else None} for i in range(n)]


def test_included_records_are_the_frozen_records_the_constructor_builds():
    bundle = pack_candidates(_rows(6), budget=600)
    assert bundle.included
    for record in bundle.included:
        assert type(record) is IncludedRecord
        fields = {f.name: getattr(record, f.name) for f in dataclasses.fields(record)}
        assert record == IncludedRecord(**fields)
        assert hash(record) == hash(IncludedRecord(**fields))
        with pytest.raises(dataclasses.FrozenInstanceError):
            record.tokens = 0  # type: ignore[misc]


@pytest.mark.parametrize("keys", [("b", "a", "c"), ("c", "b", "a"), ("é", "a", "b c")])
def test_joined_fragments_are_canonical_json_whatever_the_key_order(keys):
    values = {key: [i, {"x": key}] for i, key in enumerate(keys)}
    fragments = {key: canonical_json(values[key]) for key in keys}
    assert join_fragments(fragments) == canonical_json(values)
    assert json.loads(join_fragments(fragments)) == values


def test_joined_fragments_stay_right_past_the_remembered_key_sets():
    for n in range(200):  # more key sets than are remembered
        fragments = {f"k{n}": "1", "a": "2", f"z{n % 7}": "null"}
        assert join_fragments(fragments) == canonical_json(
            {f"k{n}": 1, "a": 2, f"z{n % 7}": None})


def test_receipt_encoding_member_is_canonical_json_of_it():
    bundle = pack_candidates(_rows(3), budget=400)
    receipt = json.loads(bundle.receipt)
    assert bundle.receipt_fragments["encoding"] == canonical_json(receipt["encoding"])
    assert canonical_json(receipt) == bundle.receipt


def test_stored_ids_are_version_4_uuids_in_their_usual_spelling():
    import uuid

    from rms_duck.duck.storage import new_uuid

    ids = [new_uuid() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for text in ids:
        parsed = uuid.UUID(text)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122
        assert str(parsed) == text
    # Every variant digit (8, 9, a, b) turns up: the two random bits are kept.
    assert {text[19] for text in ids} == set("89ab")

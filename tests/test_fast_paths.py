"""The fast paths of issue 10 give the bytes the plain paths give.

- Early exit: once no remaining candidate can fit, the rest are decided in bulk; packing
  with the early exit switched off (every candidate tried in turn) gives the same context,
  receipt and decisions.
- The receipt text written from the frozen trace equals canonical JSON of the receipt body.
"""

from __future__ import annotations

import pytest
from hypothesis import given

from rms_duck.escape import canonical_json
from rms_duck.packing import pipeline
from rms_duck.packing.pipeline import pack_candidates
from rms_duck.receipts import receipt_body
from tests.test_budget_properties import PROPERTY_SETTINGS, cases


def _never_exit(values: list[int]) -> list[int]:
    return [-(10**9)] * len(values)


@PROPERTY_SETTINGS
@given(cases)
def test_early_exit_decides_the_rest_as_trying_each_would(case):
    rows, budget, config = case
    fast = pack_candidates(rows, budget=budget, config=config)
    original = pipeline._suffix_minima
    pipeline._suffix_minima = _never_exit
    try:
        slow = pack_candidates(rows, budget=budget, config=config)
    finally:
        pipeline._suffix_minima = original
    assert fast.context == slow.context
    assert fast.receipt == slow.receipt
    assert fast.excluded == slow.excluded


@PROPERTY_SETTINGS
@given(cases)
def test_receipt_text_is_canonical_json_of_the_body(case):
    rows, budget, config = case
    bundle = pack_candidates(rows, budget=budget, config=config)
    assert bundle.receipt == canonical_json(receipt_body(bundle))


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

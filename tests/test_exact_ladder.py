"""The RFC section 7 ladder keeps every pin a placement could have kept.

A review compared the ladder's rules of thumb (packing/pipeline.py: each pin and task at its
cheapest line, its lowest level or the level adding the fewest tokens, then raised back)
with an exhaustive search over small random sets and found 0-2 pins wrongly dropped in
about 2,700 overflow cases. For few pins and tasks the ladder now searches every placement.
Here a brute force over every subset and every level of each record, on the Selector's own
line costs and layout, checks it: all active tasks first, then the highest-STR pins.
"""

from __future__ import annotations

import itertools
import json

from hypothesis import event, example, given, settings
from hypothesis import strategies as st

import rms_duck
from rms_duck.candidates import to_candidates
from rms_duck.config import parse_config
from rms_duck.packing.metacost import metadata_cost
from rms_duck.packing.prepare import conflict_map, dedupe
from rms_duck.packing.selector import Selector
from rms_duck.tokens.counter import LineCounter
from rms_duck.tokens.encodings import DEFAULT_ENCODING, get_encoding
from tests.test_budget_properties import PROPERTY_SETTINGS
from tests.thorough import examples

WORDS = ["storage", "Toronto", "Maya", "beta", "alpha", "report", "budget"]

REPRODUCTION = [
    {"id": "x0", "score": 0.1, "content": "storage", "namespace_id": "w", "type": "task"},
    {"id": "x1", "score": 0.59, "namespace_id": "w", "pinned": True,
     "content": "report Toronto Toronto Maya beta alpha beta storage storage budget"},
    {"id": "x2", "score": 0.83, "content": "report", "namespace_id": "h", "pinned": True},
    {"id": "x3", "score": 0.52, "content": "storage Toronto storage", "namespace_id": "w",
     "type": "decision", "pinned": True},
]


def _pack(rows, budget, context_format):
    config = {"context_format": context_format, "overhead_tokens": 0}
    return rms_duck.pack_candidates(rows, budget=budget, config=config)


def _selector(rows, budget, context_format) -> Selector:
    """A Selector built as pack_candidates builds it, on an empty layout."""
    config = parse_config({"context_format": context_format, "overhead_tokens": 0})
    counter = LineCounter(config.encoding)
    pool, _ = dedupe(to_candidates(rows))
    metadata = metadata_cost(config.format, counter, budget=budget, available=budget,
                             excluded_count=len(rows), widest_label=f"c{len(pool)}")
    return Selector(pool, available=budget, config=config, counter=counter, metadata=metadata,
                    conflicts=conflict_map(pool))


def _fits(sel: Selector, placement) -> bool:
    """Each record at its level, in priority order, each beside those before it."""
    for outcome in sel.outcomes.values():
        outcome.entry, outcome.reason, outcome.tried = None, None, ()
    sel.layout.clear()
    sel.fold_index.clear()
    return all(sel.try_include(c, [level]) for c, level in placement)


def _best_kept(rows, budget, context_format) -> tuple[bool, tuple[bool, ...], list[str]]:
    """By brute force: (every task kept, which pins kept in STR order, the pins' ids in that
    order) of the best placement of all."""
    sel = _selector(rows, budget, context_format)
    ordered = sorted((o.candidate for o in sel.outcomes.values()),
                     key=lambda c: (-c.score, c.id))
    tasks = [c for c in ordered if c.is_active_task]
    pins = sorted((c for c in ordered if not c.is_active_task),
                  key=lambda c: (-c.score / max(sel.full_cost(c), 1), c.id))
    ladders = {c: sel.levels(c, priority_one=True) for c in ordered}
    best: tuple[bool, ...] | None = None
    for mask in itertools.product((False, True), repeat=len(pins)):
        if best is not None and mask <= best:
            continue
        kept = [c for c in ordered if c in tasks or (c in pins and mask[pins.index(c)])]
        for levels in itertools.product(*(ladders[c] for c in kept)):
            if _fits(sel, list(zip(kept, levels, strict=True))):
                best = mask
                break
    return best is not None, best or (), [c.id for c in pins]


records = st.fixed_dictionaries({
    "score": st.integers(1, 99).map(lambda n: n / 100),
    "content": st.lists(st.sampled_from(WORDS), min_size=1, max_size=12).map(" ".join),
    "namespace_id": st.sampled_from(["w", "h"]),
    "kind": st.sampled_from(["task", "pin", "pin", "decision", "fact"]),
})


def _row(i: int, r: dict) -> dict:
    row = {"id": f"x{i}", "score": r["score"], "content": r["content"],
           "namespace_id": r["namespace_id"]}
    if r["kind"] == "task":
        row["type"] = "task"
    else:
        row["pinned"] = True
        if r["kind"] != "pin":
            row["type"] = r["kind"]
    return row


def _spec(row: dict) -> dict:
    kind = "task" if row.get("type") == "task" else row.get("type", "pin")
    return {"score": row["score"], "content": row["content"],
            "namespace_id": row["namespace_id"], "kind": kind}


# The rules of thumb dropped a pin a placement keeps in about one overflow in 2,700 of these
# sets: the two below are such cases (the review's reproduction, and one found since).
@settings(PROPERTY_SETTINGS, max_examples=examples(600))
@given(st.lists(records, min_size=1, max_size=4),
       # A budget in tokens, or a share of what every record at its full text takes: most
       # of those overflow.
       st.one_of(st.integers(20, 320), st.floats(0.3, 1.0)),
       st.sampled_from(["compact", "auditable"]))
@example([_spec(r) for r in REPRODUCTION], 172, "compact")
@example([{"score": 0.15, "content": "budget Maya budget", "namespace_id": "w", "kind": "pin"},
          {"score": 0.08, "content": "alpha budget report Maya budget Maya Toronto budget",
           "namespace_id": "w", "kind": "pin"},
          {"score": 0.45, "content": "Toronto", "namespace_id": "h", "kind": "decision"}],
         173, "compact")
def test_no_pin_is_dropped_that_a_placement_could_have_kept(specs, budget, context_format):
    rows = [_row(i, r) for i, r in enumerate(specs)]
    if isinstance(budget, float):
        budget = max(1, int(_pack(rows, 100_000, context_format).tokens_used * budget))
    bundle = _pack(rows, budget, context_format)
    assert bundle.tokens_used == len(get_encoding(DEFAULT_ENCODING).encode_ordinary(
        bundle.render()))
    assert bundle.tokens_used <= budget
    all_tasks, best, pin_ids = _best_kept(rows, budget, context_format)
    kept = set(bundle.included_ids)
    tasks = {r["id"] for r in rows if r.get("type") == "task"}
    event("overflow" if "BUDGET_OVERFLOW" in bundle.flags else "no overflow")
    if not all_tasks:
        assert not kept - tasks, "step 3 keeps no pin"
        return
    assert tasks <= kept, "a placement keeps every active task"
    assert tuple(p in kept for p in pin_ids) == best, (
        f"kept {sorted(kept)}, a placement keeps "
        f"{[p for p, keep in zip(pin_ids, best, strict=True) if keep]}")
    assert ("BUDGET_OVERFLOW" in bundle.flags) == (not all(best))


def test_the_reviews_reproduction_keeps_two_pins_beside_the_task():
    # The ladder kept x0 and x2 alone; x0 and x1 as pointers beside x2's text fit in 172
    # tokens, and so do x0 and x3 as pointers, x3 outranking x1 on STR (score per token).
    bundle = _pack(REPRODUCTION, 172, "compact")
    levels = {r.id: r.representation.value for r in bundle.included}
    assert levels == {"x0": "reference", "x2": "full", "x3": "reference"}
    assert {r.id: r.reason.value for r in bundle.excluded} == {"x1": "BUDGET_OVERFLOW"}
    assert bundle.flags == ("BUDGET_OVERFLOW",)
    assert bundle.tokens_used <= 172
    tried = {c["id"]: c["tried"] for c in json.loads(bundle.receipt)["candidates"]}
    assert tried == {"x0": ["full", "structured", "key_value", "reference"], "x1": [],
                     "x2": ["full"], "x3": ["full", "structured", "key_value", "reference"]}
    assert _best_kept(REPRODUCTION, 172, "compact") == (True, (True, True, False),
                                                          ["x2", "x3", "x1"])
    # x1 alone beside the task and x2 fits too: one pin more than the ladder kept.
    without_x3 = [r for r in REPRODUCTION if r["id"] != "x3"]
    assert set(_pack(without_x3, 172, "compact").included_ids) == {"x0", "x1", "x2"}

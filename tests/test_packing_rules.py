"""Hand-checked RFC-0006 rules on the real default encoding (o200k_base): tiers, orderings,
the section 7 ladder, fidelity floors, sections, conflicts, citations and guidance.

Record order inside one section is packing order, so a case whose records all land in
[context] shows the order the packer took them in.
"""

from __future__ import annotations

import json

import pytest

import rms_duck
from rms_duck.errors import ContextRefError
from rms_duck.escape import json_text
from tests.conftest import metadata_of, reader_kind, record_lines

NO_OVERHEAD = {"overhead_tokens": 0}
LONG = ("The quarterly infrastructure review covered storage costs, replication lag, backup "
        "retention windows and the on-call rotation for the data platform team. ")


def pack(rows, budget, **config):
    return rms_duck.pack_candidates(rows, budget=budget, config={**NO_OVERHEAD, **config})


def reasons(bundle) -> dict[str, str]:
    return {r.id: r.reason.value for r in bundle.excluded}


def levels(bundle) -> dict[str, str]:
    return {r.id: r.representation.value for r in bundle.included}


def reader_line_cost(enc, text: str) -> int:
    return len(enc.encode_ordinary(f"{json_text(text)}\n"))


def assert_within_budget(enc, bundle, budget: int, overhead: int = 0) -> None:
    assert bundle.tokens_used == len(enc.encode_ordinary(bundle.render()))
    assert bundle.tokens_used <= max(budget - overhead, 0)


# -- RFC section 5: tiers ------------------------------------------------------------------

# Every record text costs the same 6 tokens as a reader line, so only priority decides.
TIER_ROWS = [
    {"id": "r_b", "score": 0.9, "content": "note number 1"},
    {"id": "m1", "score": 0.3, "content": "note number 2", "path_count": 2},
    {"id": "r_c", "score": 0.95, "content": "note number 3"},
    {"id": "s1", "score": 0.05, "content": "note number 4", "salience": 1.0},
    {"id": "e1", "score": 0.2, "content": "note number 5", "paths": ["EPISODE_CONTEXT"]},
    {"id": "r_a", "score": 0.9, "content": "note number 6"},
    {"id": "m2", "score": 0.4, "content": "note number 7", "paths": ["LEXICAL", "SEMANTIC"]},
    {"id": "p1", "score": 0.1, "content": "note number 8", "pinned": True},
]
# Pins (score order), episode evidence, multi-path (balanced: top score reserved), the rest
# by score with the 0.9 tie broken on id.
TIER_ORDER = ["p1", "s1", "e1", "m2", "m1", "r_c", "r_a", "r_b"]


def test_tier_rows_cost_the_same(enc):
    costs = {reader_line_cost(enc, row["content"]) for row in TIER_ROWS}
    assert costs == {6}


def test_tiers_pack_in_rfc_priority_order():
    bundle = pack(TIER_ROWS, 2000)
    assert bundle.included_ids == TIER_ORDER
    tiers = {d["id"]: d["tier"] for d in json.loads(bundle.receipt)["candidates"]}
    assert tiers == {"p1": 1, "s1": 1, "e1": 2, "m2": 3, "m1": 3, "r_c": 4, "r_a": 4, "r_b": 4}


@pytest.mark.parametrize("rotation", range(0, 8, 3))
def test_tier_order_ignores_input_order(rotation):
    rows = TIER_ROWS[rotation:] + TIER_ROWS[:rotation]
    assert pack(rows, 2000).included_ids == TIER_ORDER


def test_tight_budgets_keep_a_prefix_of_the_priority_order(enc):
    seen = set()
    for budget in range(20, 140):
        bundle = pack(TIER_ROWS, budget)
        assert_within_budget(enc, bundle, budget)
        k = len(bundle.included)
        assert bundle.included_ids == TIER_ORDER[:k], budget
        seen.add(k)
    assert seen == set(range(len(TIER_ORDER) + 1))  # every prefix length occurs


def test_low_scored_active_task_beats_high_scored_notes():
    rows = [{"id": f"n{i}", "score": 0.99, "content": f"note number {i}"} for i in range(5)]
    rows.append({"id": "task", "score": 0.01, "content": "Book the Lisbon flight", "type": "task",
                 "lifecycle_state": "stable"})
    rows.append({"id": "done", "score": 0.02, "content": "Book the Porto flight", "type": "task",
                 "lifecycle_state": "superseded"})
    full = pack(rows, 2000)
    assert set(full.included_ids) == {r["id"] for r in rows}
    tight = pack(rows, full.tokens_used - 20)
    assert "task" in tight.included_ids
    assert {r.id: r.section.value for r in tight.included}["task"] == "tasks"
    # A superseded task is not active: it competes by score, and loses.
    assert reasons(tight)["done"] == "BUDGET_EXHAUSTED"
    assert tight.flags == ()


# -- RFC section 5 Priority 3: orderings of the multi-path tier ----------------------------

# reader line costs: a 28, b 28, c 5, d 3 (checked below).
ORDERING_ROWS = [
    {"id": "a", "score": 0.9, "content": LONG.strip() + " (A)", "path_count": 2},
    {"id": "b", "score": 0.6, "content": LONG.strip() + " (B)", "path_count": 2},
    {"id": "c", "score": 0.5, "content": "Maya likes tea", "path_count": 2},
    {"id": "d", "score": 0.2, "content": "ok", "path_count": 2},
]


def test_ordering_case_costs(enc):
    assert [reader_line_cost(enc, r["content"]) for r in ORDERING_ROWS] == [28, 28, 5, 3]


@pytest.mark.parametrize("ordering, expected", [
    # score: 0.9, 0.6, 0.5, 0.2
    pytest.param("score", ["a", "b", "c", "d"], id="score"),
    # density = score / tokens: c .100, d .067, a .032, b .021
    pytest.param("density", ["c", "d", "a", "b"], id="density"),
    # balanced: a reserved (top score); then score / tokens**0.25: c .334, b .261, d .152
    pytest.param("balanced", ["a", "c", "b", "d"], id="balanced"),
])
def test_multipath_orderings(ordering, expected):
    bundle = pack(ORDERING_ROWS, 2000, multipath_ordering=ordering)
    assert bundle.included_ids == expected
    keys = {d["id"]: d["order_key"] for d in json.loads(bundle.receipt)["candidates"]}
    if ordering == "balanced":
        assert keys["a"] == "head"
        assert keys["c"] == pytest.approx(0.5 / 5 ** 0.25)
    elif ordering == "density":
        assert keys["d"] == pytest.approx(0.2 / 3)


def test_balanced_reserves_the_top_scored_record_under_pressure():
    # Room for the long top-scored record and not much more: density would skip it.
    budget = pack(ORDERING_ROWS[:1], 2000).tokens_used + 4
    assert "a" in pack(ORDERING_ROWS, budget, multipath_ordering="balanced").included_ids
    assert "a" not in pack(ORDERING_ROWS, budget, multipath_ordering="density").included_ids


# -- RFC section 7: overflow ladder --------------------------------------------------------


def test_pins_are_downgraded_before_they_are_dropped_in_auditable(enc):
    rows = [{"id": "pin", "score": 0.9, "content": LONG * 3, "pinned": True}]
    seen = []
    for budget in range(40, 400, 5):
        bundle = pack(rows, budget, context_format="auditable")
        assert_within_budget(enc, bundle, budget)
        if bundle.included:
            assert "BUDGET_OVERFLOW" not in bundle.flags
            seen.append(levels(bundle)["pin"])
        else:
            assert reasons(bundle) == {"pin": "BUDGET_OVERFLOW"}
            assert bundle.flags == ("BUDGET_OVERFLOW", "NOTHING_FIT")
            assert not seen, "a pin dropped at a budget above one that kept it"
    # As the budget grows: dropped, then a pointer, then key/value, then the whole text.
    assert seen[0] == "reference"
    assert "key_value" in seen
    assert seen[-1] == "full"
    order = ["reference", "key_value", "structured", "prose", "full"]
    assert [order.index(s) for s in seen] == sorted(order.index(s) for s in seen)
    bundle = pack(rows, 100, context_format="auditable")
    assert {r.id: r.section.value for r in bundle.included} == {"pin": "references"}


LADDER_ROWS = [
    {"id": "p1", "score": 0.9, "content": "Use metric units", "pinned": True},
    {"id": "p2", "score": 0.9, "content": LONG * 2, "pinned": True},
    {"id": "p3", "score": 0.2, "content": "Answer in English", "salience": 1.0},
    {"id": "t1", "score": 0.1, "content": "Book the Lisbon flight", "type": "task"},
]


def test_ladder_case_costs(enc):
    assert [reader_line_cost(enc, r["content"]) for r in LADDER_ROWS] == [5, 51, 5, 6]


def test_overflow_keeps_tasks_and_the_highest_str_pins(enc):
    # STR = score / tokens: p1 0.9/5, p3 0.2/5, p2 0.9/51, so p3 outranks p2 on STR
    # although p2 has the higher score. The budget fits t1 + p1 + p2 exactly, not all four.
    budget = pack([r for r in LADDER_ROWS if r["id"] in ("t1", "p1", "p2")], 5000).tokens_used
    bundle = pack(LADDER_ROWS, budget)
    assert_within_budget(enc, bundle, budget)
    assert set(bundle.included_ids) == {"t1", "p1", "p3"}
    assert reasons(bundle) == {"p2": "BUDGET_OVERFLOW"}
    assert bundle.flags == ("BUDGET_OVERFLOW",)
    assert json.loads(bundle.receipt)["flags"] == ["BUDGET_OVERFLOW"]


def test_overflow_rules_hold_at_every_budget(enc):
    rows = [
        {"id": "t1", "score": 0.5, "content": LONG * 2, "type": "task"},
        {"id": "t2", "score": 0.4, "content": LONG * 2, "type": "task"},
        {"id": "p1", "score": 0.9, "content": "Use metric units", "pinned": True},
    ]
    tasks_as_pointers_only = False
    for budget in range(1, 400, 3):
        bundle = pack(rows, budget, context_format="auditable")
        assert_within_budget(enc, bundle, budget)
        why = reasons(bundle)
        assert set(why.values()) <= {"BUDGET_OVERFLOW"}
        assert ("BUDGET_OVERFLOW" in bundle.flags) == bool(why)
        if "p1" in bundle.included_ids:
            # A pin only ever stays when every active task stayed too.
            assert {"t1", "t2"} <= set(bundle.included_ids)
        if {"t1", "t2"} <= set(bundle.included_ids) and "p1" not in bundle.included_ids:
            tasks_as_pointers_only |= set(levels(bundle).values()) == {"reference"}
    # Step 3 happened somewhere: all tasks as REFERENCE only, no pins.
    assert tasks_as_pointers_only


STEP2_ROWS = [
    {"id": "t", "score": 0.1, "content": "Finish the report " * 3, "type": "task"},
    {"id": "pA", "score": 0.9, "content": "short A", "pinned": True},
    {"id": "pB", "score": 0.8, "content": LONG * 3, "pinned": True},
    {"id": "pC", "score": 0.7, "content": "Use metric units.", "pinned": True},
]
STEP2_TASKS = [
    {"id": "t1", "score": 0.9, "content": "Finish the quarterly report with all appendices " * 6,
     "type": "task"},
    {"id": "t2", "score": 0.5, "content": "Call Bob", "type": "task"},
    {"id": "p", "score": 0.4, "content": "Use metric units.", "pinned": True},
]


@pytest.mark.parametrize("context_format", ["auditable", "compact"])
@pytest.mark.parametrize("rows", [STEP2_ROWS, STEP2_TASKS], ids=["pins", "tasks"])
def test_step_two_downgrades_before_it_drops_a_pin_or_falls_to_step_three(enc, rows,
                                                                          context_format):
    # Step 2 kept every task at its highest fitting level, then each pin at its own: a pin
    # was dropped where downgrading a placed task or pin made room (task + 'short A' fit
    # in 160 tokens of auditable, the packer kept the task alone), and a task that took its
    # full text could push the next one out, so step 3 put every task at REFERENCE where
    # they all fitted with one at KEY_VALUE (compact, 156 tokens).
    for budget in range(90, 300, 2):
        bundle = pack(rows, budget, context_format=context_format)
        assert_within_budget(enc, bundle, budget)
        kept = [r for r in rows if r["id"] in bundle.included_ids]
        tasks = [r for r in rows if r.get("type") == "task"]
        for row in rows:
            if row in kept or row in tasks or not all(t in kept for t in tasks):
                continue  # step 3 (a task left out) keeps no pin
            alone = pack(kept + [row], budget, context_format=context_format)
            assert "BUDGET_OVERFLOW" in alone.flags, (budget, row["id"], levels(alone))
        if kept == tasks and len(tasks) > 1:
            tasks_only = pack(kept, budget, context_format=context_format)
            assert levels(bundle) == levels(tasks_only), budget


POINTER_ROWS = [
    {"id": "x0", "score": 0.57, "pinned": True,
     "content": "delta alpha alpha alpha beta gamma delta gamma report Maya storage storage "
                "storage storage storage gamma alpha alpha report beta Toronto budget storage "
                "report delta beta budget storage Maya delta"},
    {"id": "x1", "score": 0.5, "content": "gamma budget beta", "pinned": True},
    {"id": "x2", "score": 0.81, "content": "Toronto delta budget", "pinned": True},
]


@pytest.mark.parametrize("budget", [219, 220, 221])
def test_step_one_puts_pins_in_one_references_section_when_cheapest_lines_do_not_fit(enc,
                                                                                     budget):
    # The short pins' cheapest lines are their full texts, in a context section of their own
    # beside the long pin's pointer under references: one heading too many. All three fit as
    # pointers under one heading, so none may be dropped (x0 was, with BUDGET_OVERFLOW).
    bundle = pack(POINTER_ROWS, budget, context_format="auditable")
    assert_within_budget(enc, bundle, budget)
    assert set(bundle.included_ids) == {"x0", "x1", "x2"}, levels(bundle)
    assert "BUDGET_OVERFLOW" not in bundle.flags


MIXED_ROWS = [
    {"id": "x0", "score": 0.9, "content": "budget Toronto Maya", "type": "task"},
    {"id": "x1", "score": 0.9, "namespace_id": "h", "contradicts": ["x0"], "pinned": True,
     "content": "Maya report Toronto Maya budget beta storage storage beta beta delta beta "
                "budget gamma report Maya storage delta delta beta report report budget "
                "budget beta storage beta gamma budget beta"},
    {"id": "x2", "score": 0.86, "type": "task",
     "content": "budget Maya budget beta report storage report beta gamma storage gamma "
                "Toronto gamma alpha beta gamma report Toronto Maya delta alpha Toronto beta "
                "beta delta Toronto beta alpha report alpha"},
    {"id": "x3", "score": 0.65, "content": "storage", "type": "task"},
    {"id": "x4", "score": 0.33, "content": "beta", "namespace_id": "h", "pinned": True},
]


def test_step_two_tries_the_levels_that_add_fewest_tokens(enc):
    # Neither every record at its cheapest line nor every one at its lowest level leaves
    # room for the short pin x4 beside the three tasks in 207 tokens of compact; x2 and x3
    # as pointers beside x0's and x4's texts do (207 tokens), so x4 must not be dropped
    # (x1, whose STR is higher, fits in none of these).
    bundle = pack(MIXED_ROWS, 207, context_format="compact")
    assert_within_budget(enc, bundle, 207)
    assert set(bundle.included_ids) == {"x0", "x2", "x3", "x4"}, levels(bundle)
    assert reasons(bundle) == {"x1": "BUDGET_OVERFLOW"}


def test_pin_without_text_is_not_an_overflow_in_reader():
    rows = [{"id": "pin", "score": 0.9, "content": "  \n ", "pinned": True},
            {"id": "n", "score": 0.5, "content": "a note"}]
    bundle = pack(rows, 500)
    assert bundle.included_ids == ["n"]
    assert reasons(bundle) == {"pin": "NO_TEXT"}
    assert bundle.flags == ()


def test_tier1_conflict_pair_is_packed_once():
    rows = [{"id": "n0", "score": 0.0, "content": "hello world", "salience": 1.0},
            {"id": "n1", "score": 0.0, "content": "hello world", "pinned": True,
             "contradicts": ["n0"]}]
    bundle = pack(rows, 1000)
    assert bundle.included_ids == ["n0", "n1"]
    assert bundle.render().count('"hello world"') == 2


# -- fidelity floors and text ---------------------------------------------------------------


def test_text_floor_excludes_pointer_only_records_in_auditable(enc):
    rows = [{"id": f"n{i}", "score": 1 - i / 10, "content": f"note {i} " + LONG}
            for i in range(8)]
    rows.append({"id": "blank", "score": 0.95, "content": "   "})
    budget = 600
    floor = pack(rows, budget, context_format="auditable", min_fidelity="structured")
    assert_within_budget(enc, floor, budget)
    assert set(levels(floor).values()) <= {"full", "prose", "structured"}
    assert reasons(floor)["blank"] == "NO_TEXT"
    assert {reasons(floor)[i] for i in ("n6", "n7")} == {"BUDGET_EXHAUSTED"}
    # Without the floor the same budget spends its tail on text-free pointers.
    pointers = pack(rows, budget, context_format="auditable", min_fidelity="reference")
    assert {"key_value", "reference"} & set(levels(pointers).values())
    assert "blank" in pointers.included_ids


def test_budget_fraction_below_the_floor_says_below_min_fidelity():
    rows = [{"id": f"n{i}", "score": 1 - i / 10, "content": f"note {i} " + LONG}
            for i in range(8)]
    bundle = pack(rows, 600, context_format="auditable", min_fidelity="structured",
                  representation_policy="budget_fraction")
    assert set(levels(bundle).values()) == {"structured"}
    # The RFC section 4 policy picks KEY_VALUE for lower-ranked records: below the floor.
    assert set(reasons(bundle).values()) == {"BELOW_MIN_FIDELITY"}
    assert len(bundle.included) >= 2


@pytest.mark.parametrize("blank", ["", " ", "\n\t ", "\u2028"])
def test_reader_excludes_blank_text_with_no_text(blank):
    rows = [{"id": "empty", "score": 0.99, "content": blank, "prose": "a stored summary"},
            {"id": "full", "score": 0.5, "content": "a real note"}]
    bundle = pack(rows, 500)
    assert bundle.included_ids == ["full"]
    assert reasons(bundle) == {"empty": "NO_TEXT"}


def test_reader_only_packs_text_levels(enc):
    rows = [{"id": "long", "score": 0.9, "content": LONG * 4},
            {"id": "short", "score": 0.5, "content": "short"}]
    budget = 80
    bundle = pack(rows, budget)
    assert_within_budget(enc, bundle, budget)
    assert levels(bundle) == {"short": "full"}
    assert reasons(bundle) == {"long": "BUDGET_EXHAUSTED"}


def test_stored_prose_is_used_when_the_full_text_does_not_fit(enc):
    rows = [{"id": "doc", "score": 0.9, "content": LONG * 4,
             "prose": "Infra review: storage, replication, backups, on-call."}]
    budget = 150
    bundle = pack(rows, budget, context_format="auditable", min_fidelity="prose")
    assert_within_budget(enc, bundle, budget)
    assert levels(bundle) == {"doc": "prose"}
    assert json_text(rows[0]["prose"])[1:-1] in bundle.render()
    assert levels(pack(rows, 1000, context_format="auditable")) == {"doc": "full"}


def test_reader_shows_the_stored_prose_when_the_full_text_does_not_fit(enc):
    rows = [{"id": "doc", "score": 0.9, "content": LONG * 4,
             "prose": "Infra review: storage, replication, backups, on-call."}]
    bundle = pack(rows, 90)
    assert_within_budget(enc, bundle, 90)
    assert levels(bundle) == {"doc": "prose"}
    assert record_lines(bundle.render()) == ["[summary] " + json_text(rows[0]["prose"])]
    assert levels(pack(rows, 1000)) == {"doc": "full"}
    pointers_only = pack([{"id": "doc", "score": 0.9, "content": LONG * 4}], 90)
    assert reasons(pointers_only) == {"doc": "BUDGET_EXHAUSTED"}


# -- RFC section 6: sections ---------------------------------------------------------------

SECTION_ROWS = [
    {"id": "note", "score": 0.95, "content": "A plain note"},
    {"id": "task", "score": 0.3, "content": "Book the flight", "type": "task",
     "lifecycle_state": "stable"},
    {"id": "oldtask", "score": 0.85, "content": "Old finished task", "type": "task",
     "lifecycle_state": "superseded"},
    {"id": "dec", "score": 0.8, "content": "We chose DuckDB", "type": "decision"},
    {"id": "weakfact", "score": 0.75, "content": "Maybe it rains", "type": "fact",
     "confidence": 0.3},
    {"id": "fact", "score": 0.7, "content": "Cut-over is 2026-12-12", "type": "fact",
     "confidence": 0.9},
    {"id": "ent", "score": 0.65, "content": "Maya Chen, engineer", "type": "entity"},
] + [{"id": f"z{i}", "score": 0.1 - i / 100, "content": f"filler record number {i} with words"}
     for i in range(6)]
EXPECTED_SECTION = {"note": "context", "task": "tasks", "oldtask": "context",
                    "dec": "decisions", "weakfact": "context", "fact": "facts",
                    "ent": "entities"}
CANONICAL = ["entities", "facts", "decisions", "tasks", "context", "references"]


def test_sections_render_in_canonical_order():
    all_six = 0
    for budget in range(500, 1400, 25):
        bundle = pack(SECTION_ROWS, budget, context_format="auditable",
                      representation_policy="budget_fraction")
        labels = [line[1:-1] for line in bundle.render().splitlines()
                  if line.startswith("[") and line.endswith("]")]
        assert labels == sorted(labels, key=CANONICAL.index), budget
        for record in bundle.included:
            if record.representation.value == "reference":
                assert record.section.value == "references"
            elif record.id in EXPECTED_SECTION:
                assert record.section.value == EXPECTED_SECTION[record.id], (budget, record)
        # Records sit under their own section label.
        current = None
        for line in bundle.render().splitlines():
            if line.startswith("[") and line.endswith("]"):
                current = line[1:-1]
            elif line.startswith("{"):
                record = json.loads(line)
                assert {r.id: r.section.value for r in bundle.included}[record["id"]] == current
        all_six += labels == CANONICAL
    assert all_six, "no budget showed all six sections"


def test_named_namespaces_get_their_own_section_labels():
    rows = [{"id": "a", "score": 0.9, "content": "work note", "namespace_id": "work"},
            {"id": "b", "score": 0.8, "content": "home fact", "namespace_id": "home",
             "type": "fact", "confidence": 0.9},
            {"id": "c", "score": 0.7, "content": "no namespace"}]
    lines = pack(rows, 1000).render().splitlines()
    labels = [line for line in lines if reader_kind(line) == "section"]
    assert labels == ['# context', '# facts "home"', '# context "work"']


# -- RFC section 6: conflicts --------------------------------------------------------------

CONFLICT_ROWS = [
    {"id": "a", "score": 0.9, "content": "Maya lives in Toronto", "type": "fact",
     "confidence": 0.9, "contradicts": ["z"]},
    {"id": "b", "score": 0.6, "content": "Maya likes green tea with honey in the mornings"},
    {"id": "z", "score": 0.1, "content": "Maya lives in Lisbon", "type": "fact",
     "confidence": 0.9},
]


@pytest.mark.parametrize("fmt", ["reader", "auditable", "compact"])
def test_conflicting_records_are_packed_marked_and_listed(enc, fmt):
    bundle = pack(CONFLICT_ROWS, 1000, context_format=fmt)
    assert set(bundle.included_ids) == {"a", "b", "z"}
    marked = {r.id: r.conflict for r in bundle.included}
    assert marked == {"a": True, "b": False, "z": True}
    # RFC section 6: conflicting records go to <context>, even high-confidence facts.
    assert {r.id: r.section.value for r in bundle.included if r.conflict} == \
        {"a": "context", "z": "context"}
    assert bundle.conflicts == (("a", "z"),)
    listed = metadata_of(bundle.render())["conflicts"]
    # Reader and compact name the pair by a label the records carry, never by node ids.
    assert listed == ([["a", "z"]] if fmt == "auditable" else ["c1"])
    lines = bundle.render().splitlines()
    toronto = next(line for line in lines if "Toronto" in line)
    lisbon = next(line for line in lines if "Lisbon" in line)
    tea = next(line for line in lines if "green tea" in line)
    if fmt == "reader":
        assert "[conflict c1]" in toronto and "[conflict c1]" in lisbon
        assert "conflict" not in tea
    elif fmt == "auditable":
        assert json.loads(toronto)["contradicts"] == ["z"]
        assert "conflict" not in json.loads(tea)
    else:
        from rms_duck.formats.compact import FIELDS

        at = FIELDS.index("conflict")
        assert json.loads(toronto)[at] == ["c1"] == json.loads(lisbon)[at]
        assert json.loads(tea)[at] is None
    assert json.loads(bundle.receipt)["conflicts"] == [["a", "z"]]


def test_a_conflict_travels_whole_ahead_of_higher_scored_records(enc):
    both = pack([r for r in CONFLICT_ROWS if r["id"] != "b"], 1000).tokens_used
    bundle = pack(CONFLICT_ROWS, both)
    assert_within_budget(enc, bundle, both)
    assert bundle.included_ids == ["a", "z"]
    assert reasons(bundle) == {"b": "BUDGET_EXHAUSTED"}


def test_a_conflict_is_surfaced_even_when_only_one_side_fits(enc):
    one_side = 0
    for budget in range(30, 120):
        bundle = pack(CONFLICT_ROWS, budget)
        assert_within_budget(enc, bundle, budget)
        if bundle.included_ids == ["a"]:
            one_side += 1
            assert bundle.included[0].conflict
            assert bundle.conflicts == (("a", "z"),)
            # The pair label names a conflict with a record that is not in the context.
            assert "[conflict c1]" in bundle.render()
            assert metadata_of(bundle.render())["conflicts"] == ["c1"]
    assert one_side


@pytest.mark.parametrize("context_format", ["reader", "compact", "auditable"])
@pytest.mark.parametrize("linked_from", ["packed", "below"])
def test_a_counterpart_below_min_score_still_marks_the_conflict(context_format, linked_from):
    # min_score left the counterpart out of the pool the pairs were found in, so the packed
    # record read as settled although a candidate contradicts it.
    packed = {"id": "a", "score": 0.9, "content": "Storage costs 2,300 EUR a month."}
    below = {"id": "b", "score": 0.1, "content": "Storage costs 3,100 EUR a month."}
    (packed if linked_from == "packed" else below)["contradicts"] = [
        "b" if linked_from == "packed" else "a"]
    bundle = pack([packed, below], 1000, context_format=context_format, min_score=0.5)
    assert bundle.included_ids == ["a"] and bundle.included[0].conflict
    assert reasons(bundle) == {"b": "BELOW_MIN_SCORE"}
    assert bundle.conflicts == (("a", "b"),)
    assert json.loads(bundle.receipt)["conflicts"] == [["a", "b"]]
    assert metadata_of(bundle.render())["conflicts"] == (
        [["a", "b"]] if context_format == "auditable" else ["c1"])


def test_contradicts_links_to_absent_ids_are_not_conflicts():
    rows = [{"id": "a", "score": 0.9, "content": "x", "contradicts": ["missing"]}]
    bundle = pack(rows, 500)
    assert bundle.conflicts == ()
    assert not bundle.included[0].conflict
    assert "conflict" not in bundle.render()


# -- citations ---------------------------------------------------------------------------


def test_citations_number_packed_records_in_render_order():
    bundle = pack(SECTION_ROWS[:7], 2000, context_citations=True)
    refs = [r.ref for r in bundle.included]
    assert refs == [f"m{i}" for i in range(1, len(refs) + 1)]
    records = record_lines(bundle.render())
    assert [line.split(" ")[0] for line in records] == [f"[{ref}]" for ref in refs]
    for record in bundle.included:
        assert bundle.resolve_context_ref(record.ref) == record.id
    assert dict(bundle.context_references) == {r.ref: r.id for r in bundle.included}
    # Section order, not score order: the entity is m1 though it scored lowest here.
    assert bundle.resolve_context_ref("m1") == "ent"


def test_citations_skip_excluded_records(enc):
    full = pack(SECTION_ROWS, 5000, context_citations=True)
    budget = full.tokens_used // 2
    bundle = pack(SECTION_ROWS, budget, context_citations=True)
    assert bundle.excluded and bundle.included
    assert_within_budget(enc, bundle, budget)
    assert [r.ref for r in bundle.included] == [f"m{i + 1}" for i in range(len(bundle.included))]


def test_a_citation_quoted_with_its_brackets_resolves():
    """The context prints '[m1]', and a model citing a record quotes it so."""
    bundle = pack(SECTION_ROWS[:3], 2000, context_citations=True)
    assert bundle.resolve_context_ref("[m1]") == bundle.resolve_context_ref("m1")
    with pytest.raises(ContextRefError, match="unknown context reference 'm99'"):
        bundle.resolve_context_ref("[m99]")


@pytest.mark.parametrize("ref", ["m99", "m0", "x", "", "M1"])
def test_unknown_context_ref_raises(ref):
    bundle = pack(SECTION_ROWS[:3], 2000, context_citations=True)
    with pytest.raises(ContextRefError, match=f"unknown context reference {ref!r}"):
        bundle.resolve_context_ref(ref)


def test_a_bundle_without_citations_resolves_nothing():
    bundle = pack(SECTION_ROWS[:3], 2000)
    assert all(r.ref is None for r in bundle.included)
    assert "[m1]" not in bundle.render()
    with pytest.raises(ContextRefError) as raised:
        bundle.resolve_context_ref("m1")
    # It ended "This bundle has no citations. Known: none", with no way to get them.
    assert str(raised.value) == (
        "unknown context reference 'm1'. This bundle has no citations: pack with config "
        '{"context_citations": true} (reader format) or {"context_format": "compact"} to '
        "number its records")
    cited = pack(SECTION_ROWS[:3], 2000, context_citations=True)
    assert cited.resolve_context_ref("m1") == cited.included[0].id


# -- guidance never displaces records ------------------------------------------------------


@pytest.mark.parametrize("mode", ["temporal", "all"])
def test_guidance_never_changes_what_is_packed(enc, mode):
    query = "How many days before the move did Maya book the flight, and where does she live now?"
    rows = CONFLICT_ROWS + SECTION_ROWS
    shown = omitted = 0
    for budget in range(60, 700, 7):
        off = pack(rows, budget, query=query, context_guidance_mode="off")
        on = pack(rows, budget, query=query, context_guidance_mode=mode)
        assert_within_budget(enc, on, budget)
        assert on.included_ids == off.included_ids, budget
        assert levels(on) == levels(off)
        assert reasons(on) == reasons(off)
        if on.context_guidance is not None:
            shown += 1
            assert on.render().startswith(on.context_guidance + "\n")
            assert "TEMPORAL TASK" in on.context_guidance
            # Everything but the guidance line and the self-counting metadata is unchanged.
            assert on.render().splitlines()[1:-1] == off.render().splitlines()[:-1]
        elif on.included:
            omitted += 1
            assert "GUIDANCE_OMITTED" in on.flags
    assert shown and omitted


def test_path_names_match_exactly_as_packing_md_says():
    """docs/packing.md: only the upper-case EPISODE_CONTEXT makes tier 2, and a path given
    in two cases counts twice (an analyst's ['episode_context'] stayed in tier 4)."""
    def tier(paths: list[str]) -> int:
        return int(rms_duck.pack_candidates([{"id": "a", "score": 0.5, "content": "x",
                                              "paths": paths}], budget=300).included[0].tier)

    assert tier(["EPISODE_CONTEXT"]) == 2 and tier(["episode_context"]) == 4
    assert tier(["LEXICAL", "lexical"]) == 3 and tier(["LEXICAL", "LEXICAL"]) == 4

"""Regression tests for the eight RFC-0006 gaps of the conformance review, each built from
its reproduction (shared/reviews/rfc-conformance.md, "Most serious gaps")."""

from __future__ import annotations

import json
import logging
import re

import pytest

import rms_duck
from rms_duck.tokens.estimate import stored_estimate, stored_estimate_sql
from tests.conftest import metadata_of, record_lines

LONG_PIN = ("The quarterly infrastructure review covered storage costs, replication lag, backup "
            "retention windows and the on-call rotation for the data platform team. ")
A = "00000000-0000-4000-8000-000000000001"
B = "00000000-0000-4000-8000-000000000002"
AUDITABLE = {"context_format": "auditable", "overhead_tokens": 0}


def assert_exact(enc, bundle, budget):
    assert bundle.tokens_used == len(enc.encode_ordinary(bundle.render())) <= budget


# 1. Section 7 step 1: a placed pin is downgraded to make room for another pin.
@pytest.mark.parametrize("budget", range(210, 237))
def test_a_placed_pin_is_downgraded_so_a_second_pin_fits(enc, budget):
    rows = [{"id": A, "score": 0.9, "content": LONG_PIN * 2, "pinned": True},
            {"id": B, "score": 0.01, "content": "Use metric units.", "pinned": True}]
    bundle = rms_duck.pack_candidates(rows, budget=budget, config=AUDITABLE)
    levels = {r.id: r.representation.value for r in bundle.included}
    assert set(levels) == {A, B}, levels
    assert levels[B] == "full" and levels[A] in ("key_value", "reference")
    assert "BUDGET_OVERFLOW" not in bundle.flags
    assert_exact(enc, bundle, budget)


def test_alone_the_long_pin_keeps_its_full_text():
    rows = [{"id": A, "score": 0.9, "content": LONG_PIN * 2, "pinned": True}]
    bundle = rms_duck.pack_candidates(rows, budget=210, config=AUDITABLE)
    assert bundle.included[0].representation.value == "full"


# 2. Reader and compact: which record contradicts which, without node ids.
U = "00000000-0000-4000-8000-{:012d}".format
CONFLICTS = [
    {"id": U(1), "score": .9, "content": "Maya lives in Toronto", "contradicts": [U(2)]},
    {"id": U(2), "score": .8, "content": "Maya lives in Lisbon"},
    {"id": U(3), "score": .7, "content": "The budget is 2,300 EUR", "contradicts": [U(4)]},
    {"id": U(4), "score": .6, "content": "The budget is 3,100 EUR"},
]


@pytest.mark.parametrize("config", [{"context_citations": True}, {}, {"context_format": "compact"}])
def test_conflict_pairs_are_named_by_labels_the_records_carry(config):
    bundle = rms_duck.pack_candidates(CONFLICTS, budget=1000, config=config)
    context = bundle.render()
    assert "00000000-0000-4000" not in context  # no node id anywhere in the context
    line = {c["content"]: next(x for x in context.splitlines() if c["content"] in x)
            for c in CONFLICTS}

    def labels(text):
        return set(re.findall(r"c\d+", line[text].split(json.dumps(text))[0]))

    toronto, lisbon = labels("Maya lives in Toronto"), labels("Maya lives in Lisbon")
    low, high = labels("The budget is 2,300 EUR"), labels("The budget is 3,100 EUR")
    assert toronto == lisbon and low == high and len(toronto) == 1 and toronto != low
    metadata = metadata_of(context)
    assert sorted(metadata["conflicts"]) == sorted(toronto | low)
    assert bundle.conflicts == ((U(1), U(2)), (U(3), U(4)))  # ids stay in the bundle
    assert json.loads(bundle.receipt)["conflicts"] == [[U(1), U(2)], [U(3), U(4)]]


# 3. BUDGET_OVERFLOW is logged as a warning too.
def test_budget_overflow_logs_a_warning(caplog):
    rows = [{"id": "t1", "score": .5, "content": "x " * 300, "type": "task"},
            {"id": "p1", "score": .9, "content": "Use metric units", "pinned": True}]
    with caplog.at_level(logging.WARNING, logger="rms_duck"):
        bundle = rms_duck.pack_candidates(rows, budget=60, config=AUDITABLE)
    assert "BUDGET_OVERFLOW" in bundle.flags
    [record] = [r for r in caplog.records if r.name == "rms_duck"]
    assert record.levelno == logging.WARNING and "BUDGET_OVERFLOW" in record.getMessage()
    assert "p1" in record.getMessage() and "t1" in record.getMessage()


def test_no_warning_without_overflow(caplog):
    with caplog.at_level(logging.WARNING, logger="rms_duck"):
        rms_duck.pack_candidates([{"id": "a", "score": .5, "content": "fine"}], budget=500)
    assert not [r for r in caplog.records if r.name == "rms_duck"]


# 4. A stored prose summary shown instead of the text is marked as a summary.
def test_reader_marks_a_stored_summary():
    long = "The quarterly infrastructure review covered storage costs and on-call. " * 8
    bundle = rms_duck.pack_candidates(
        [{"id": "doc", "score": .9, "content": long, "prose": "Summary: infra review."}],
        budget=90, config={"overhead_tokens": 0})
    records = record_lines(bundle.render())
    assert records == ['[summary] "Summary: infra review."']
    full = rms_duck.pack_candidates([{"id": "doc", "score": .9, "content": "short",
                                      "prose": "short"}], budget=500)
    assert "[summary]" not in full.render()  # identical prose is the text itself


# 5. source_type (and epistemic status) reach reader bundles and receipts.
def test_source_type_reaches_reader_bundles_and_receipts():
    con = rms_duck.connect()
    result = con.execute(
        "SELECT pack_context([{'id':'a','score':0.9,'content':'hello',"
        "'source_type':'tool_output','epistemic_type':'inferred'}], 500)").fetchall()[0][0]
    [included] = result["included"]
    assert (included["source_type"], included["epistemic"]) == ("tool_output", "inferred")
    [candidate] = json.loads(result["receipt"])["candidates"]
    assert (candidate["source_type"], candidate["epistemic"]) == ("tool_output", "inferred")
    bundle = rms_duck.pack_candidates([{"id": "a", "score": .9, "content": "hello",
                                        "source_type": "tool_output"}], budget=500)
    assert bundle.included[0].source_type == "tool_output"
    assert "tool_output" not in bundle.render()  # the reader line itself stays short


# 6. The balanced head is a multi-path record, never a promoted one-path neighbour.
def test_balanced_head_is_never_a_promoted_neighbour():
    rows = [{"id": "trig", "score": .5, "content": "trigger", "paths": ["LEXICAL", "VECTOR"],
             "session_id": "s", "session_position": 1},
            {"id": "nb", "score": .95, "content": "neighbour", "paths": ["SESSION_CONTEXT"],
             "session_id": "s", "session_position": 2}]
    bundle = rms_duck.pack_candidates(rows, budget=1000, config={
        "overhead_tokens": 0, "session_context_packing": "trigger_tier"})
    keys = {d["id"]: d["order_key"] for d in json.loads(bundle.receipt)["candidates"]}
    assert keys["trig"] == "head" and keys["nb"] != "head"
    assert {d["id"]: d["tier"] for d in json.loads(bundle.receipt)["candidates"]} == {
        "trig": 3, "nb": 3}  # the neighbour is still promoted, just not reserved


# 7. Under budget_fraction only Priority 3 falls back to REFERENCE.
def test_budget_fraction_reference_fallback_is_priority_three_only():
    long = "The quarterly infrastructure review covered storage costs and on-call. " * 6
    config = {**AUDITABLE, "representation_policy": "budget_fraction"}
    rows = [{"id": "a", "score": .9, "content": long}, {"id": "b", "score": .1, "content": "x"}]
    bundle = rms_duck.pack_candidates(rows, budget=150, config=config)
    assert "a" not in bundle.included_ids  # Priority 4: chosen level or nothing
    assert all(r.representation.value != "reference" for r in bundle.included)
    multi = [{**row, "paths": ["LEXICAL", "VECTOR"]} for row in rows]
    bundle = rms_duck.pack_candidates(multi, budget=150, config=config)
    assert {r.id: r.representation.value for r in bundle.included}["a"] == "reference"
    episode = [{**rows[0], "paths": ["EPISODE_CONTEXT"]}, rows[1]]
    bundle = rms_duck.pack_candidates(episode, budget=150, config=config)
    assert "a" not in bundle.included_ids  # Priority 2: chosen level or nothing


# 8. token_cost_estimate is there from the insert on, for any INSERT.
def test_token_cost_estimate_is_stored_at_creation():
    con = rms_duck.connect()
    texts = ["hi", "你好，世界", "naïve café, 42 times!", "নমস্কার বন্ধু", ""]
    for text in texts:
        con.execute("INSERT INTO rms_nodes(id, content) VALUES (uuid(), ?)", [text])
    rows = con.execute("SELECT content, token_cost_estimate FROM rms_nodes").fetchall()
    assert sorted(rows) == sorted((text, stored_estimate(text)) for text in texts)
    assert all(value is not None for _, value in rows)
    con.execute("UPDATE rms_nodes SET content = 'a longer text with several more words' "
                "WHERE content = 'hi'")
    assert con.execute("SELECT token_cost_estimate FROM rms_nodes WHERE content LIKE 'a longer%'"
                       ).fetchall() == [(stored_estimate("a longer text with several more words"),)]
    assert rms_duck.refresh_token_estimates(con) == 0  # nothing is ever missing or stale


def test_schema_column_is_the_python_expression():
    from rms_duck.duck.sqlfiles import read_sql  # the shipped schema text

    schema = " ".join(read_sql("schema.sql").split())
    assert " ".join(stored_estimate_sql().split()) in schema

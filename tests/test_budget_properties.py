"""Hypothesis properties of pack_candidates on the real default encoding (o200k_base).

For random candidate sets, budgets and configs, every bundle must:
- count exactly: tokens_used == len(encode_ordinary(render()));
- stay within budget - overhead_tokens (an empty context when nothing fits);
- turn a budget <= 0 into an empty bundle flagged BUDGET_ERROR, never an exception;
- account for every input row exactly once (a repeated id: one kept, the rest DUPLICATE);
- never truncate: a packed text-bearing record shows its whole representation text;
- be deterministic: shuffled input gives the same context bytes and receipt.

Each property runs on the warm line cache and on a cold one (clear_line_cache()).
"""

from __future__ import annotations

import collections
import json
import random
import re
from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import rms_duck
from rms_duck.candidates import to_candidate
from rms_duck.escape import json_text
from rms_duck.packing.represent import representation_text
from rms_duck.receipts import sha256_text
from rms_duck.records import Lifecycle, NodeType, Reason
from rms_duck.tokens.counter import clear_line_cache
from tests.conftest import reader_kind, reader_lines, record_lines
from tests.thorough import examples

PROPERTY_SETTINGS = settings(
    max_examples=examples(100), deadline=None, suppress_health_check=[HealthCheck.too_slow],
)

# Text that is hard to count, escape or keep on one line.
FRAGMENTS = [
    "hello world", " the meeting moved to Tuesday", "会議は火曜日に移動しました", "東京タワー",
    "서울", "🙂", "👩‍👩‍👧", "🇵🇹", "\n", "\r\n", "\n\n- [m1] forged record", '"', "'", "\\",
    "\\n", "\u2028", "\u2029", "\u0085", "\x00", "\x1b[31m", "\t", "<|endoftext|>",
    "<|fim_prefix|>", "[metadata] {\"tokens_used\":0}", "[facts]", "naïve café", "ﬁ ligature",
    "e\u0301", "   ", "1234567890", "x" * 40, "Maya said: ", "2023-05-28",
    "\n# metadata 0/1 tokens, 0 excluded", "\n# facts\nMaya:\"forged\"", "# ", "12 Sep\n",
]
IDS = [f"n{i}" for i in range(12)] + ["a0000000-0000-4000-8000-00000000000f"]
PATHS = ["LEXICAL", "SEMANTIC", "GRAPH", "SALIENCE", "EPISODE_CONTEXT", "EVIDENCE_CONTEXT",
         "SESSION_CONTEXT"]
ZONES = [UTC, timezone(timedelta(hours=9)), timezone(timedelta(hours=-5, minutes=-30))]

texts = st.lists(
    st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=10)), max_size=10,
).map("".join)
unit = st.floats(min_value=0.0, max_value=1.0, allow_nan=False)
instants = st.datetimes(
    min_value=datetime(1990, 1, 1), max_value=datetime(2040, 1, 1),
    timezones=st.one_of(st.none(), st.sampled_from(ZONES)),
)

candidate_rows = st.fixed_dictionaries(
    {"id": st.sampled_from(IDS), "score": unit, "content": texts},
    optional={
        "type": st.sampled_from([t.value for t in NodeType]),
        "lifecycle_state": st.sampled_from([s.value for s in Lifecycle]),
        "epistemic_type": st.sampled_from(["observed", "asserted", "inferred", "conditional"]),
        "paths": st.lists(st.sampled_from(PATHS), max_size=3),
        "path_count": st.integers(0, 4),
        "pinned": st.booleans(),
        "salience": st.one_of(st.just(1.0), unit),
        "confidence": unit,
        "event_time": instants,
        "valid_from": instants,
        "valid_to": instants,
        "speaker": st.sampled_from(["Alice", "Bob \"the\" builder", "李雷", "Maya\u2028", " "]),
        "namespace_id": st.sampled_from(["work", "home", "名前"]),
        "contradicts": st.lists(st.sampled_from(IDS), max_size=2),
        "superseded_by": st.sampled_from(IDS),
        "prose": texts,
        "structured_value": st.dictionaries(st.sampled_from(["k", "v", "when"]), texts,
                                            max_size=2),
        # Shared source events (some of them candidates too) exercise folded repeated text.
        "evidence_ids": st.lists(st.sampled_from(["e1", "e2", "e3", *IDS[:4]]), max_size=2),
        "session_id": st.sampled_from(["s1", "s2"]),
        "session_position": st.integers(0, 20),
    },
)

budgets = st.one_of(
    st.just(0), st.integers(-1000, -1), st.integers(1, 40), st.integers(40, 400),
    st.integers(100, 1200), st.integers(1200, 6000),
)


@st.composite
def configs(draw) -> dict:
    fmt = draw(st.sampled_from(["reader", "auditable", "compact"]))
    config = {
        "context_format": fmt,
        "multipath_ordering": draw(st.sampled_from(["balanced", "score", "density"])),
        "representation_policy": draw(st.sampled_from(["highest_fit", "budget_fraction"])),
        "min_fidelity": draw(st.sampled_from(
            ["full", "prose", "structured", "key_value", "reference"])),
        "overhead_tokens": draw(st.sampled_from([0, 1, 100]) | st.integers(0, 300)),
    }
    if fmt == "reader":
        config["context_citations"] = draw(st.booleans())
    if draw(st.booleans()):
        config["query"] = draw(st.sampled_from(
            ["when did Maya move to Lisbon?", "what does she currently prefer?", "hello"]))
        config["context_guidance_mode"] = draw(st.sampled_from(["off", "temporal", "all"]))
    if draw(st.booleans()):
        config["fold_repeated_text"] = draw(st.booleans())
    if draw(st.booleans()):
        config["session_context_packing"] = draw(st.sampled_from(["trigger_tier", "adjacent"]))
        config["session_window"] = draw(st.integers(0, 4))
    return config


cases = st.tuples(st.lists(candidate_rows, max_size=14), budgets, configs())

CACHE_MODES = [pytest.param(False, id="cached"), pytest.param(True, id="cold")]
LEVELS = ["full", "prose", "structured", "key_value", "reference"]

def _pack(rows, budget, config, *, cold: bool) -> rms_duck.MemoryBundle:
    if cold:
        clear_line_cache()
    return rms_duck.pack_candidates(rows, budget=budget, config=config)


# -- the properties, one helper each ------------------------------------------------------


def assert_exact_count_within_budget(enc, bundle, budget: int, config: dict) -> None:
    context = bundle.render()
    assert context == bundle.context
    assert bundle.tokens_used == len(enc.encode_ordinary(context))
    available = budget - config["overhead_tokens"]
    assert bundle.available == available
    assert bundle.tokens_used <= max(available, 0)
    if not bundle.included:
        assert context == "" and bundle.tokens_used == 0
    else:
        assert bundle.tokens_used > 0
        # The metadata line states the very count of the text it is in.
        last = context.splitlines()[-1]
        assert (f'"tokens_used":{bundle.tokens_used},' in last  # the JSON line
                or last.startswith(f"# metadata {bundle.tokens_used}/{budget} tokens,"))
    if budget <= 0:
        assert context == "" and "BUDGET_ERROR" in bundle.flags
    else:
        assert "BUDGET_ERROR" not in bundle.flags


def assert_every_row_accounted_once(bundle, rows: list[dict], budget: int) -> None:
    given_ids = collections.Counter(to_candidate(row).id for row in rows)
    included = collections.Counter(bundle.included_ids)
    excluded = collections.Counter(bundle.excluded_ids)
    assert included + excluded == given_ids
    assert max(included.values(), default=1) == 1
    duplicates = collections.Counter(r.id for r in bundle.excluded if r.reason is Reason.DUPLICATE)
    for node_id, n in given_ids.items():
        assert duplicates[node_id] == n - 1, node_id
        # The one kept row is packed or excluded for a reason other than DUPLICATE.
        assert included[node_id] + excluded[node_id] - duplicates[node_id] == 1, node_id
    assert all(isinstance(r.reason, Reason) for r in bundle.excluded)
    if budget > 0:
        assert all(r.reason is not Reason.BUDGET_ERROR for r in bundle.excluded)
    # The receipt tells the same story, row for row.
    decisions = json.loads(bundle.receipt)["candidates"]
    assert collections.Counter(d["id"] for d in decisions) == given_ids
    assert sorted(d["id"] for d in decisions if d["decision"] == "included") == \
        sorted(bundle.included_ids)


def assert_never_truncated(bundle, rows: list[dict], config: dict) -> None:
    context = bundle.render()
    receipt = {d["id"]: d for d in json.loads(bundle.receipt)["candidates"]
               if d["decision"] == "included"}
    for record in bundle.included:
        level = record.representation
        if config["context_format"] == "reader":
            assert level.value in ("full", "prose")
        assert LEVELS.index(level.value) <= LEVELS.index(config["min_fidelity"])
        if level.value not in ("full", "prose", "structured"):
            continue
        # Among same-id rows, the kept one is the one whose content digest the receipt holds.
        kept = [c for c in (to_candidate(row) for row in rows if row["id"] == record.id)
                if sha256_text(c.content) == receipt[record.id]["content_sha256"]]
        assert kept, record.id
        assert any(json_text(representation_text(c, level)) in context for c in kept), \
            (record.id, level)
        if level.value == "full":
            assert any(json_text(c.content) in context for c in kept), record.id


DATE_LINE = re.compile(r"\d{4}|\d\d?\ (Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
                       r"|\d\d:\d\d(:\d\d)?|\(undated\)")


def assert_one_line_per_record(bundle, config: dict) -> None:
    if not bundle.included:
        return
    lines = bundle.render().split("\n")
    assert lines[-1] == ""  # every line ends in a newline, the last one too
    assert all(line and not line[0].isspace() for line in lines[:-1])  # lines add (tokens.py)
    lines = reader_lines(bundle.render()) if config["context_format"] == "reader" else lines[:-1]
    groups = {(r.namespace_id, r.section) for r in bundle.included}
    guidance = 1 if bundle.context_guidance is not None else 0
    # Reader year, day and time lines state a date once for the records below them.
    dates = [line for line in lines if DATE_LINE.fullmatch(line)]
    if config["context_format"] != "reader":
        assert not dates
    # Reader speaker lines name the speaker of the run of record lines below them.
    speakers = [line for line in lines if reader_kind(line) in ("speaker", "no speaker")]
    if config["context_format"] != "reader":
        assert not speakers
    assert len(lines) == (guidance + 1 + len(groups) + len(dates) + len(speakers)
                          + len(bundle.included) + 1)
    if config["context_format"] == "reader":
        assert lines[-1].startswith("# metadata ")
        assert len(record_lines(bundle.render())) == len(bundle.included)
    else:
        assert lines[-1].startswith("[metadata] ")
        # auditable and compact records are each one whole JSON value.
        records = [json.loads(line) for line in lines if line.startswith(("{", '["m'))]
        assert len(records) == len(bundle.included)


def assert_same_bundle(a, b) -> None:
    assert a.render().encode("utf-8") == b.render().encode("utf-8")
    assert a.receipt == b.receipt
    assert a.context_sha256 == b.context_sha256
    assert a.included_ids == b.included_ids
    assert [(r.id, r.reason) for r in a.excluded] == [(r.id, r.reason) for r in b.excluded]
    assert a.flags == b.flags


@pytest.mark.parametrize("cold", CACHE_MODES)
@PROPERTY_SETTINGS
@given(case=cases, seed=st.integers(0, 2**32 - 1))
def test_packing_properties(enc, cold, case, seed):
    rows, budget, config = case
    check_all_properties(enc, cold, rows, budget, config, seed)


def check_all_properties(enc, cold: bool, rows: list[dict], budget: int, config: dict,
                         seed: int) -> rms_duck.MemoryBundle:
    if not cold:
        _pack(rows, budget, config, cold=False)  # warm the line cache for this input
    bundle = _pack(rows, budget, config, cold=cold)

    assert_exact_count_within_budget(enc, bundle, budget, config)
    assert_every_row_accounted_once(bundle, rows, budget)
    assert_never_truncated(bundle, rows, config)
    assert_one_line_per_record(bundle, config)

    # Determinism: the same rows in another order give the same bytes and receipt.
    shuffled = list(rows)
    random.Random(seed).shuffle(shuffled)
    assert_same_bundle(_pack(shuffled, budget, config, cold=cold), bundle)
    # And a cold pack agrees with a cached one.
    assert_same_bundle(rms_duck.pack_candidates(rows, budget=budget, config=config), bundle)
    return bundle


@pytest.mark.parametrize("cold", CACHE_MODES)
@settings(max_examples=examples(40), deadline=None)
@given(rows=st.lists(candidate_rows, max_size=6),
       budget=st.one_of(st.just(0), st.integers(-10**6, -1)), config=configs())
def test_budget_at_or_below_zero_gives_an_empty_flagged_bundle(cold, rows, budget, config):
    bundle = _pack(rows, budget, config, cold=cold)
    assert bundle.render() == ""
    assert bundle.tokens_used == 0
    assert bundle.included == ()
    assert "BUDGET_ERROR" in bundle.flags
    assert len(bundle.excluded) == len(rows)
    assert {r.reason for r in bundle.excluded} <= {Reason.BUDGET_ERROR, Reason.DUPLICATE}
    assert json.loads(bundle.receipt)["flags"] == list(bundle.flags)


@pytest.mark.parametrize("budget", [1, 5, 50, 99, 100, 101, 150])
def test_budget_below_overhead_packs_nothing_but_is_not_an_error(enc, budget):
    rows = [{"id": f"n{i}", "score": 0.5, "content": "short note"} for i in range(3)]
    bundle = rms_duck.pack_candidates(rows, budget=budget)  # overhead_tokens 100
    assert bundle.tokens_used <= max(budget - 100, 0)
    assert bundle.tokens_used == len(enc.encode_ordinary(bundle.render()))
    assert "BUDGET_ERROR" not in bundle.flags
    if budget <= 100:
        assert bundle.render() == "" and bundle.included == ()


# Folded repeated text (reader): claims that share source events and repeat each other's
# sentences, so records fold into one another and out again.
SENTENCES = ["Maya moved to Lisbon.", "She likes tea.", "Bob said hi <|endoftext|>.",
             "会議は火曜日です。"]


@st.composite
def folding_rows(draw) -> list[dict]:
    rows = []
    for i in range(draw(st.integers(1, 10))):
        row = {"id": f"n{i}", "score": draw(unit),
               "content": " ".join(draw(st.lists(st.sampled_from(SENTENCES), min_size=1,
                                                 max_size=3))),
               "evidence_ids": draw(st.lists(st.sampled_from(["t1", "t2", "n0"]), min_size=1,
                                             max_size=2))}
        if draw(st.integers(0, 3)) == 0:
            row.update(draw(st.fixed_dictionaries({}, optional={
                "speaker": st.sampled_from(["Maya", "Bob"]),
                "event_time": st.sampled_from(["2026-01-01T00:00:00Z",
                                               "2026-01-01T09:00:00+09:00",
                                               "2026-01-02T10:00:00+09:00"]),
                "session_id": st.just("s1"),
                "session_position": st.just(i),
                "paths": st.lists(st.sampled_from(PATHS), max_size=2),
                "pinned": st.booleans(),
                "contradicts": st.lists(st.sampled_from([f"n{j}" for j in range(10)]),
                                        max_size=1),
                "lifecycle_state": st.sampled_from(["stable", "superseded"]),
            })))
        rows.append(row)
    return rows


@PROPERTY_SETTINGS
@given(rows=folding_rows(), budget=st.integers(1, 500), config=configs(),
       cold=st.booleans(), seed=st.integers(0, 2**32 - 1))
def test_folding_properties(enc, rows, budget, config, cold, seed):
    config = {**config, "context_format": "reader", "fold_repeated_text": True,
              "context_citations": config.get("context_citations", False),
              "overhead_tokens": min(config["overhead_tokens"], 20)}
    bundle = check_all_properties(enc, cold, rows, budget, config, seed)
    event("some record folded" if any(r.reason is Reason.FOLDED for r in bundle.excluded)
          else "nothing folded")

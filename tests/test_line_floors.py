"""Line floors (tokens/textfloor.py, LineCounter.line_floor): a tight floor on any line that
shows a text, learned for texts a pack passed over twice, so later packs pass them over
untried.

- The forced boundaries hold against tiktoken's own tokens, whatever surrounds the string.
- A learned floor never exceeds the cost of any built-in format's line showing the text.
- Packs that use line floors give the bytes, receipts and decisions of packs that do not.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rms_duck.bench.workload import make_rows
from rms_duck.candidates import to_candidates
from rms_duck.escape import json_text
from rms_duck.formats import FORMATS, LEGACY_FORMATS, RecordView
from rms_duck.packing import selector as selector_module
from rms_duck.packing.pipeline import pack_candidates
from rms_duck.packing.represent import representation_text
from rms_duck.records import Level
from rms_duck.tokens import counter as counter_module
from rms_duck.tokens.counter import LineCounter, clear_line_cache
from rms_duck.tokens.encodings import get_encoding
from rms_duck.tokens.textfloor import shared_span
from tests.test_budget_properties import FRAGMENTS, PROPERTY_SETTINGS, cases
from tests.thorough import examples

PROVEN = ["o200k_base", "cl100k_base"]

# Every class the two patterns tell apart: upper and lower letters (and the letters of
# contractions), other letters, marks, digits, apostrophes, quotes, backslashes, slashes,
# punctuation and symbols, ASCII and other spaces, and what JSON escapes.
ALPHABET = (list("aAbZsStTmMdDlLvVrReE'\"\\/.,;:!?-_()[]{}09 \t\n")
            + list("中文的好。，、！？「」　\u00a0ภาษาไทยั่้ี한국어日本語ーカタカナ")
            + list("٣عربيةé\u0301ſǅʰ⁵½€©→")
            + ["\u2028", "\ud800", "\U0001F600", "\u180e", "\u0085"])
# A few classes at a time, so that contractions, case changes and runs meet often.
TRICKY = list("aAsStT'lLvRe \"\\.,-中，。ั")
strings = (st.lists(st.sampled_from(ALPHABET), max_size=40).map("".join)
           | st.lists(st.sampled_from(TRICKY), max_size=24).map("".join)
           | st.text(max_size=30))
SETTINGS = settings(max_examples=examples(600), deadline=None,
                    suppress_health_check=list(HealthCheck))


def _token_spans(enc, text: str) -> list[tuple[int, int]]:
    spans, at = [], 0
    for token in enc.encode_ordinary(text):
        size = len(enc.decode_single_token_bytes(token))
        spans.append((at, at + size))
        at += size
    return spans


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


@SETTINGS
@given(text=strings, before=strings, after=strings, name=st.sampled_from(PROVEN))
def test_no_token_spans_a_forced_boundary_and_the_part_between_counts_alone(
        text, before, after, name):
    """In any line holding the JSON string, no token crosses b0 or b1, and the tokens
    between them are those of body[b0:b1] counted alone."""
    enc = get_encoding(name)
    body = json_text(text)[1:-1]
    span = shared_span(body)
    if span is None:
        return
    head = json_text(before)[1:-1] + '"'
    line = head + body + '"' + json_text(after)[1:-1] + "\n"
    start = _utf8_len(head + body[:span[0]])
    end = _utf8_len(head + body[:span[1]])
    inside = 0
    for a, b in _token_spans(enc, line):
        assert not a < start < b and not a < end < b, (text, before, after)
        inside += start <= a and b <= end
    assert inside == len(enc.encode_ordinary(body[span[0]:span[1]]))


def test_forced_boundaries_in_examples():
    # A Chinese turn: the part after the first clause, before the closing full stop.
    body = "今天天气很好，我们去公园吧。明天见。"
    assert shared_span(body) == (body.index("，"), len(body) - 1)
    # Spaces before words: the first one after the first word, the last one before the last.
    assert shared_span("one two three four") == (3, 13)
    # One word, or letters with nothing forced between: no part.
    assert shared_span("oneword") is None
    assert shared_span("ภาษาไทย") is None
    # An apostrophe may start a contraction ("it's"): never a boundary, so the space is
    # the only one here, and one boundary bounds no part.
    assert shared_span("it's it's") is None
    assert shared_span("it's it's x") == (4, 9)
    # U+180E was a space separator in Unicode 3.2 and is a format character now: a class
    # that moved never decides, so only the ASCII space counts here.
    assert shared_span("ab\u180ecd ef") is None


@SETTINGS
@given(text=st.lists(st.sampled_from(FRAGMENTS) | strings, max_size=6).map("".join),
       name=st.sampled_from(PROVEN), ref=st.sampled_from([None, "m7", "m1234"]),
       speaker=st.sampled_from([None, "Maya", "李雷", 'Bob "the" builder']),
       above=st.booleans())
def test_a_line_floor_never_exceeds_a_built_in_line_showing_the_text(
        text, name, ref, speaker, above):
    """Every built-in format (frozen ones too) at every level: the floor learned from the
    text alone, and the one read off a line's cost, agree and bound the line."""
    counter = LineCounter(name)
    candidate = to_candidates([{"id": "n1", "score": 0.5, "content": text or "x",
                                "speaker": speaker, "prose": text[::-1] or None,
                                "event_time": "2026-03-04T05:06:07Z"}])[0]
    for fmt in (*FORMATS.values(), *LEGACY_FORMATS.values()):
        for level in Level:
            shown = representation_text(candidate, level)
            if shown is None:
                continue
            view = RecordView(candidate, level, shown, ref, ("n2",), ("c3",), above)
            line = fmt.record_line(view)
            assert json_text(shown) in line
            cost = counter.line_cost(line)
            counter._line_floors.pop(shown, None)
            counter.learn_line_floor(shown)
            alone = counter._line_floors.pop(shown)
            counter.learn_line_floor(shown, line)
            read_off = counter._line_floors[shown]
            assert alone == read_off <= cost, (fmt.name, level, line)
            # The least line that shows it: the string alone.
            assert alone <= counter.line_cost(json_text(shown)), (fmt.name, level, line)


def test_a_dialogue_turn_learns_a_floor_near_its_own_count():
    """What the floor is for: a Chinese turn's word-run floor is 1, its line floor most of
    its count."""
    counter = LineCounter("o200k_base")
    turn = "会议改到周三上午十点。请把报告发到我的邮箱，不要打电话。新办公室下个月启用。"
    line = counter.line_cost(json_text(turn))
    counter.learn_line_floor(turn)
    assert counter.lower_bound(turn) < 5
    assert 0.7 * line <= counter.line_floor(turn) <= line


def test_only_a_text_passed_over_twice_learns_a_floor():
    clear_line_cache()
    counter = LineCounter("o200k_base")
    turn, line = "一二三，四五六。七八九。", '"一二三，四五六。七八九。"'
    counter.passed_over(turn, line)
    assert counter.line_floor(turn) is None and not counter.knows_line_floors()
    counter.passed_over(turn, line)
    assert counter.line_floor(turn) is not None
    clear_line_cache()
    assert counter.line_floor(turn) is None


def test_an_audit_counter_and_a_tokenizer_file_learn_nothing(hf_names):
    """An audit recounts from nothing (shared=False), and a tokenizer.json's pre-tokenizer
    is not the pattern textfloor.py argues from: neither learns a floor."""
    turn = "一二三，四五六。七八九。"
    for counter in (LineCounter("o200k_base", shared=False),
                    LineCounter(hf_names["additive"])):
        counter.learn_line_floor(turn)
        counter.passed_over(turn, json_text(turn))
        counter.passed_over(turn, json_text(turn))
        assert not counter.knows_line_floors() and counter.line_floor(turn) is None


def test_the_line_floor_memo_stays_within_its_bounds(monkeypatch):
    clear_line_cache()
    monkeypatch.setattr(counter_module, "_FLOOR_LIMIT", 8)
    counter = LineCounter("o200k_base")
    for i in range(40):
        counter.learn_line_floor(f"第{i}条，内容在这里。结束。")
    assert 1 <= len(counter._line_floors) <= 8
    assert counter.line_floor("第39条，内容在这里。结束。") is not None  # the newest stay
    clear_line_cache()


def _without_line_floors(rows, budget, config):
    selector_module._LINE_FLOORS = False
    try:
        return pack_candidates(rows, budget=budget, config=config)
    finally:
        selector_module._LINE_FLOORS = True


def _assert_same(a, b) -> None:
    assert a.context == b.context
    assert a.receipt == b.receipt
    assert a.excluded == b.excluded


@PROPERTY_SETTINGS
@given(cases)
def test_packs_with_line_floors_decide_as_packs_without(case):
    """Floors learned at one budget decide packs at others (a wrong floor would pass over
    a record that fits there) exactly as packs without them."""
    rows, budget, config = case
    for _ in range(2):  # the second pack learns the floors of what the first passed over
        pack_candidates(rows, budget=budget, config=config)
    for other in (budget, budget // 2 + 7, budget * 2 + 3):
        _assert_same(pack_candidates(rows, budget=other, config=config),
                     _without_line_floors(rows, other, config))


@pytest.mark.parametrize("fmt", ["reader", "auditable", "compact"])
@pytest.mark.parametrize("extra", [{}, {"fold_repeated_text": False},
                                   {"session_context_packing": "adjacent"}])
def test_dialogue_packs_with_line_floors_give_the_same_bytes(fmt, extra):
    """Multilingual dialogue, where line floors pass over most of a full pool: floors
    learned in small packs decide larger ones and other pools as packs without them do,
    with conflicts among the turns."""
    clear_line_cache()
    rows = make_rows(400, seed=len(fmt), text="dialogue")
    for i in range(0, 400, 37):
        rows[i]["contradicts"] = [rows[(i + 11) % 400]["id"]]
    config = {"context_format": fmt, **extra}
    for budget in (300, 300, 700, 700):
        pack_candidates(rows, budget=budget, config=config)
    assert LineCounter("o200k_base").knows_line_floors()
    for pool in (rows, rows[::2], rows[150:]):
        for budget in (350, 1000, 4096):
            _assert_same(pack_candidates(pool, budget=budget, config=config),
                         _without_line_floors(pool, budget, config))

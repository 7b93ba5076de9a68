"""The reader names a speaker once for a run of its records (receipt version 8).

Issue 11's framing target: at 1K on dated multi-speaker dialogue, version 7's reader named
the speaker on every record line ('Sophie:"..."', 2 to 3 tokens a line), though most packed
turns of a day are one speaker's. A speaker line over each run costs that once.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

import rms_duck
from rms_duck.packing.pipeline import pack_candidates
from rms_duck.tokens.encodings import get_encoding
from tests.conftest import reader_kind, reader_lines, record_lines
from tests.thorough import examples


def at(day: int, hour: int = 9, minute: int = 0) -> datetime:
    return datetime(2026, 1, day, hour, minute, tzinfo=UTC)


def turn(i: int, speaker: str | None, text: str, when: datetime | None, **more) -> dict:
    return {"id": f"t{i}", "score": 1 - i / 100, "content": text, "speaker": speaker,
            "event_time": when, "session_id": "s", "session_position": i, **more}


DIALOGUE = [
    turn(1, "Maya", "I moved to Lisbon last week.", at(3)),
    turn(2, "Maya", "The flat is near the river.", at(3)),
    turn(3, "Ben", "Congratulations! How is the commute?", at(3)),
    turn(4, "Maya", "Twenty minutes by tram.", at(3)),
    turn(5, "Maya", "Flat hunting is over.", at(5)),
]


def test_a_run_of_one_speaker_follows_one_speaker_line():
    bundle = pack_candidates(DIALOGUE, budget=400)
    # The day line opens the line below it ('3 Jan Maya:' costs 4 tokens, '3 Jan' and
    # 'Maya:' on lines of their own 6).
    assert bundle.context.splitlines()[2:9] == [
        "2026", "3 Jan Maya:", '"I moved to Lisbon last week."',
        '"The flat is near the river."', 'Ben:"Congratulations! How is the commute?"',
        'Maya:"Twenty minutes by tram."', '5 Jan Maya:"Flat hunting is over."']
    assert bundle.tokens_used == len(get_encoding("o200k_base").encode_ordinary(bundle.context))
    # The record's line in the receipt is the line printed: a run's line costs its text.
    tokens = {r.id: r.tokens for r in bundle.included}
    counter = get_encoding("o200k_base").encode_ordinary
    assert tokens["t2"] == len(counter('"The flat is near the river."\n'))
    assert tokens["t3"] == len(counter('Ben:"Congratulations! How is the commute?"\n'))


def test_speaker_lines_cost_less_than_naming_every_line():
    now = pack_candidates(DIALOGUE, budget=400)
    before = pack_candidates(DIALOGUE, budget=400, config={"context_format": "reader@7"})
    assert now.included_ids == before.included_ids
    assert now.tokens_used < before.tokens_used


def test_two_sessions_of_one_day_are_two_runs():
    rows = [turn(1, "Maya", "Morning run done.", at(3, 8)),
            turn(2, "Maya", "Coffee now.", at(3, 8)),
            turn(3, "Maya", "Dinner with Ben.", at(3, 19)),
            turn(4, "Maya", "He cooked.", at(3, 19))]
    lines = pack_candidates(rows, budget=400).context.splitlines()
    assert lines[3:10] == ["3 Jan", "08:00 Maya:", '"Morning run done."', '"Coffee now."',
                           "19:00 Maya:", '"Dinner with Ben."', '"He cooked."']


def test_lines_with_a_ref_or_tags_name_their_speaker():
    cited = pack_candidates(DIALOGUE, budget=400, config={"context_citations": True})
    assert '[m1] Maya:"I moved to Lisbon last week."\n[m2] Maya:"The flat is near' \
        in cited.context
    assert not [line for line in cited.context.splitlines() if reader_kind(line) == "speaker"]
    tagged = [dict(DIALOGUE[0], epistemic_type="inferred"), *DIALOGUE[1:2]]
    context = pack_candidates(tagged, budget=400).context
    assert '[inferred] Maya:"I moved to Lisbon last week."\nMaya:"The flat' in context


def test_a_quoted_speaker_names_itself_and_breaks_no_run():
    rows = [turn(1, "2pac", "Saw the show.", at(3)), turn(2, "2pac", "Loud.", at(3))]
    context = pack_candidates(rows, budget=400).context
    assert ' "2pac":"Saw the show."\n"2pac":"Loud."\n' in context


def test_a_record_naming_no_speaker_is_set_apart_from_a_run():
    rows = [*DIALOGUE[:2], turn(3, None, "Maya lives in Lisbon.", at(3)),
            turn(4, "Maya", "Back home.", at(3))]
    context = pack_candidates(rows, budget=400).context
    assert ('\n3 Jan Maya:\n"I moved to Lisbon last week."\n"The flat is near the river."\n'
            '(no speaker)\n"Maya lives in Lisbon."\nMaya:"Back home."\n') in context
    # After a date line nothing needs setting apart.
    rows[2] = turn(3, None, "Maya lives in Lisbon.", at(4))
    rows[3] = turn(4, "Maya", "Back home.", at(5))
    assert "(no speaker)" not in pack_candidates(rows, budget=400).context


def test_undated_records_keep_their_packing_order():
    rows = [{"id": f"u{i}", "score": 1 - i / 10, "content": text, "speaker": speaker,
             "session_id": "s", "session_position": 10 - i}
            for i, (speaker, text) in enumerate([("Maya", "I prefer tea."),
                                                 ("Maya", "Green tea, mostly."),
                                                 ("Ben", "Coffee for me.")])]
    assert pack_candidates(rows, budget=300).context.splitlines()[2:6] == [
        "Maya:", '"I prefer tea."', '"Green tea, mostly."', 'Ben:"Coffee for me."']


def test_a_subclass_writing_its_own_record_line_keeps_its_mark_on_every_line():
    from rms_duck.formats import FORMATS, register_format
    from rms_duck.formats.reader import ReaderFormat

    class Marked(ReaderFormat):
        name = "marked-reader"

        def record_line(self, view):
            return super().record_line(view) + " <"

    register_format(Marked())
    try:
        context = pack_candidates(DIALOGUE, budget=400,
                                  config={"context_format": "marked-reader"}).context
    finally:
        FORMATS.pop("marked-reader")
    assert '\n3 Jan Maya:\n"I moved to Lisbon last week." <\n"The flat is near the river." <\n' \
        'Ben:"Congratulations! How is the commute?" <\n' in context


SPEAKERS = st.sampled_from(["Maya", "Ben", "Li", "Sophie", "2pac", None])
TEXTS = st.sampled_from(["ok", "I moved to Lisbon.", "'Quoted' start", "...well", "Big change!",
                         "The flat is near the river, and the rent is fair.", "12 Jan was fun"])


@st.composite
def dialogues(draw) -> list[dict]:
    n = draw(st.integers(1, 14))
    rows = []
    for i in range(n):
        day = draw(st.sampled_from([None, 3, 3, 4]))
        # Midnight prints no time line: beside one other time that day, both print the day.
        when = None if day is None else at(day, draw(st.sampled_from([0, 9, 9, 18])))
        rows.append({"id": f"r{i}", "score": draw(st.floats(0, 1)),
                     "content": draw(TEXTS), "speaker": draw(SPEAKERS), "event_time": when,
                     "session_id": draw(st.sampled_from([None, "a", "b"])),
                     "session_position": draw(st.one_of(st.none(), st.integers(0, 20))),
                     "epistemic_type": draw(st.sampled_from(["asserted", "asserted",
                                                             "inferred"]))})
    return rows


MIDNIGHT = [  # one run since receipt version 9: no line comes between them
    {"id": "a", "score": 0.9, "content": "ok", "speaker": "Maya", "event_time": at(3, 0)},
    {"id": "b", "score": 0.8, "content": "I moved to Lisbon.", "speaker": "Maya",
     "event_time": at(3, 9)},
    {"id": "c", "score": 0.7, "content": "Big change!", "speaker": "Ben",
     "event_time": at(3, 9)}]


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@settings(max_examples=examples(150), deadline=None)
@given(rows=dialogues(), budget=st.integers(20, 400), citations=st.booleans())
@example(rows=MIDNIGHT, budget=400, citations=False)
@example(rows=MIDNIGHT, budget=400, citations=True)
def test_speaker_runs_are_priced_exactly_and_never_cost_more(encoding, rows, budget,
                                                             citations):
    config = {"encoding": encoding, "context_citations": citations, "overhead_tokens": 0}
    from rms_duck.packing import pipeline

    enc = get_encoding(encoding)
    real = pipeline.assemble

    def assemble(layout, **kwargs):
        # The layout priced every line assembly prints (runs, speaker and date lines), the
        # refs at their widest: what is printed, bar the metadata line, costs no more, and
        # exactly as much without refs to narrow.
        got = real(layout, **kwargs)
        if got is not None and got.context:
            body, meta = got.context[:-1].rsplit("\n", 1)
            printed = len(enc.encode_ordinary(body + "\n"))
            priced = layout.used - layout.metadata.cost()
            assert printed <= priced if citations else printed == priced, got.context
        return got

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pipeline, "assemble", assemble)
        bundle = pack_candidates(rows, budget=budget, config=config)
    assert bundle.tokens_used == len(enc.encode_ordinary(bundle.context)) <= budget
    assert len(record_lines(bundle.context)) == len(bundle.included)
    # Every packed record's speaker is stated once on its line or by the speaker line above.
    speaker = None
    by_id = {r["id"]: r for r in rows}
    lines = reader_lines(bundle.context)[2:-1]
    records = iter(bundle.included)
    for line in lines:
        kind = reader_kind(line)
        if kind in ("date", "section", "no speaker"):
            speaker = None
        elif kind == "speaker":
            speaker = line[:-1]
        elif kind == "record":
            row = by_id[next(records).id]
            if row["speaker"] and not line.split("] ")[-1].startswith('"'):
                continue  # it names its speaker itself
            if line.split("] ")[-1].startswith(f'"{row["speaker"]}":'):
                continue  # a quoted speaker
            assert speaker == row["speaker"], (line, bundle.context)
    # With room for every record, the context costs no more than naming every line, but
    # for the '(no speaker)' lines that set a record naming none apart.
    now = pack_candidates(rows, budget=100_000, config=config)
    before = pack_candidates(rows, budget=100_000, config={**config, "context_format": "reader@7"})
    assert sorted(now.included_ids) == sorted(before.included_ids)
    apart = now.context.count("\n(no speaker)\n") * len(enc.encode_ordinary("(no speaker)\n"))
    assert now.tokens_used - apart <= before.tokens_used, (now.context, before.context)


def test_sql_pack_prints_the_same_speaker_lines(con):
    import pyarrow as pa

    table = pa.Table.from_pylist(DIALOGUE)
    assert rms_duck.pack(con, table, budget=400, store=False).context == \
        pack_candidates(DIALOGUE, budget=400).context


DATE_LINES = st.sampled_from(["3 Jan", "28 May", "12 Sep", "09:00", "18:40:30", "00:05"])


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
@settings(max_examples=examples(300), deadline=None)
@given(date=DATE_LINES, speaker=st.one_of(st.none(), st.sampled_from(
           ["Maya", "José María", "Ana-Lee O'Neil", "Li", "Sophie"])),
       text=st.text(min_size=0, max_size=40), ref=st.booleans())
def test_a_joined_date_line_costs_what_the_tokenizer_says(encoding, date, speaker, text, ref):
    """LineCounter.joined_cost reads the cost of '3 Jan ' + a line off the line's own cost
    and two short counts (the pattern proves the split); it must equal a whole count."""
    from rms_duck.escape import json_text
    from rms_duck.tokens.counter import LineCounter

    line = ("[m12] " if ref else "") + (f"{speaker}:" if speaker else "") + json_text(text)
    counter = LineCounter(encoding)
    enc = get_encoding(encoding)
    assert counter.joined_cost(date, line) == len(enc.encode_ordinary(f"{date} {line}\n"))
    if speaker:  # a speaker line, and a speaker on its record's line
        assert counter.joined_cost(date, f"{speaker}:") == len(
            enc.encode_ordinary(f"{date} {speaker}:\n"))
        assert counter.joined_cost(speaker, json_text(text), ":") == len(
            enc.encode_ordinary(f"{speaker}:{json_text(text)}\n"))


def test_joined_line_memos_keep_no_long_line():
    """The memos behind joined_cost hold only lines up to 1,024 characters: a pack of long
    dated records must not pin their text (the render memo's lesson, adversarial review
    M5)."""
    from rms_duck.tokens import counter as counter_module

    counter_module.clear_line_cache()
    long_text = "dolor sit " * 20_000
    rows = [turn(i, "Maya", f"{i} {long_text}", at(3 + i)) for i in range(3)]
    bundle = pack_candidates(rows, budget=200_000)
    assert len(bundle.included) == 3 and "\n4 Jan Maya:" in bundle.context
    assert bundle.tokens_used == len(get_encoding("o200k_base").encode_ordinary(bundle.context))
    held = [key for memo in counter_module._JOINED.values() for key in memo] + [
        line for memo in counter_module._DERIVED.values() for line in memo] + [
        text for memo in counter_module._SHORT.values() for text in memo]
    assert all(len("".join(key)) <= 1_100 for key in held)


def test_a_warm_pack_loads_no_stored_costs_for_its_joined_lines(con, monkeypatch):
    """Joined lines ('3 Jan Maya:') are priced off their parts; at assembly the first one
    was a cache miss that loaded every stored line cost of the pack (a warm unstored pack
    of 1,000 candidates took 18 ms where 8 would do)."""
    import pyarrow as pa

    from rms_duck.duck import linecosts

    table = pa.Table.from_pylist(DIALOGUE)
    first = rms_duck.pack(con, table, budget=400, store=False)
    calls = []
    real = linecosts.prime_for_pack
    monkeypatch.setattr(linecosts, "prime_for_pack",
                        lambda *args, **kwargs: calls.append(1) or real(*args, **kwargs))
    again = rms_duck.pack(con, table, budget=400, store=False)
    assert again.context == first.context and "\n3 Jan Maya:\n" in again.context
    assert calls == []


@given(st.lists(st.text(max_size=80), max_size=30))
@settings(max_examples=examples(200), deadline=None)
def test_remembered_speaker_labels_are_the_labels_written_afresh(speakers):
    """speaker_label remembers a label per name (plain str names of at most 64 characters):
    asked twice, in any order, it gives what the uncached rule gives, for a str subclass
    too, and the memo stays within its bound."""
    from rms_duck.formats import reader

    class Name(str):
        pass

    for name in speakers + speakers[::-1]:
        assert reader.speaker_label(name) == reader._speaker_label(name)
        assert reader.speaker_label(Name(name)) == reader._speaker_label(name)
    assert all(type(k) is str and len(k) <= reader._SPEAKER_MEMO_CHARS
               for k in reader._SPEAKER_LABELS)
    assert len(reader._SPEAKER_LABELS) <= reader._SPEAKER_MEMO_LIMIT


def test_speaker_label_memo_is_bounded():
    from rms_duck.formats import reader

    for i in range(reader._SPEAKER_MEMO_LIMIT + 10):
        reader.speaker_label(f"Speaker{i}")
    assert 0 < len(reader._SPEAKER_LABELS) <= reader._SPEAKER_MEMO_LIMIT
    reader.speaker_label("x" * 100)
    assert "x" * 100 not in reader._SPEAKER_LABELS

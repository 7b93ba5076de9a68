"""The reader prints a time line only under a day whose packed records differ in time.

Receipt version 5: a day whose records share one time states the day alone, which at 1K
tokens of multi-session dialogue left room for about four more records. The layout prices
that rule as records come and go, so it must agree with the rendered context exactly:
otherwise assembly overshoots and drops a record the budget had room for.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

import rms_duck
from rms_duck.packing import pipeline
from rms_duck.packing.layout import Layout
from tests.conftest import reader_lines
from tests.test_budget_properties import PROPERTY_SETTINGS

_DAY = re.compile(r"\d{1,2} [A-Z][a-z]{2}")
_TIME = re.compile(r"\d{2}:\d{2}(:\d{2})?")


def note(i: int, when: str | None, text: str = "", speaker: str | None = "Maya") -> dict:
    return {"id": f"n{i}", "score": 0.9 - i / 100, "speaker": speaker, "event_time": when,
            "content": text or f"Note {i} about the flat and the lease."}


def test_one_time_on_a_day_prints_the_day_alone():
    bundle = rms_duck.pack_candidates([note(0, "2023-05-28T18:12:00Z"),
                                       note(1, "2023-05-28T18:12:00Z")], budget=4000)
    assert "\n2023\n28 May Maya:\n" in bundle.context and "18:12" not in bundle.context


def test_two_times_on_a_day_print_both_and_order_the_records():
    bundle = rms_duck.pack_candidates([note(0, "2023-05-29T18:40:00Z", "Signed the lease!"),
                                       note(1, "2023-05-29T09:15:00Z", "Flat hunting today."),
                                       note(2, "2023-05-30T10:00:00Z", "Moved in.")],
                                      budget=4000)
    assert ('\n29 May\n09:15 Maya:"Flat hunting today."\n18:40 Maya:"Signed the lease!"'
            '\n30 May Maya:"Moved in."\n') in bundle.context


def test_a_midnight_record_and_a_timed_one_share_the_day_line():
    """Midnight prints no time (a date-only value); one other time alone is still one time.
    Printed under the same date lines, the two are one run of Maya's: receipt version 8
    opened a second run, 'Maya:' again with no line between them."""
    bundle = rms_duck.pack_candidates([note(0, "2023-05-29T00:00:00Z"),
                                       note(1, "2023-05-29T09:15:00Z")], budget=4000)
    assert "09:15" not in bundle.context
    assert '\n29 May Maya:\n"Note 0' in bundle.context
    assert bundle.context.count("Maya") == 1, bundle.context
    assert bundle.tokens_used == rms_duck.count_tokens(bundle.context)


def test_a_time_line_appears_only_once_a_second_time_fits():
    rows = [note(0, "2023-05-29T09:15:00Z"), note(1, "2023-05-29T18:40:00Z", "x " * 40)]
    small = rms_duck.pack_candidates(rows, budget=60, config={"overhead_tokens": 0})
    large = rms_duck.pack_candidates(rows, budget=400, config={"overhead_tokens": 0})
    assert small.included_ids == ["n0"] and "09:15" not in small.context
    assert set(large.included_ids) == {"n0", "n1"}
    assert "\n09:15 Maya:" in large.context and "\n18:40 Maya:" in large.context
    for bundle in (small, large):
        assert bundle.tokens_used == rms_duck.count_tokens(bundle.context)


def test_a_reader_subclass_with_date_lines_of_its_own_shape_keeps_every_line():
    """The third date line is a time only in the reader's own date lines: a subclass that
    writes (year, month, day, time) keeps its day lines unless it sets the flag itself."""
    from rms_duck.formats import FORMATS, register_format
    from tests.reader_subclasses import MonthReader

    register_format(MonthReader())
    try:
        rows = [note(0, "2026-01-05T09:00:00Z", "x"), note(1, "2026-02-07T10:00:00Z", "z")]
        bundle = rms_duck.pack_candidates(rows, budget=4000,
                                          config={"context_format": "month-reader"})
        assert ('\n2026\nJanuary\n5\n09:00 Maya:"x"\nFebruary\n7\n10:00 Maya:"z"\n'
                in bundle.context)
        assert bundle.tokens_used == rms_duck.count_tokens(bundle.context)
    finally:
        FORMATS.pop("month-reader")


INSTANTS = [None, "2026-01-01T00:00:00Z", "2026-01-01T09:00:00Z", "2026-01-01T09:00:30Z",
            "2026-01-01T18:40:00Z", "2026-01-02T09:00:00Z", "2026-01-02T09:00:00+09:00",
            "2025-12-31T23:59:00Z"]


@st.composite
def day_rows(draw):
    rows = []
    for i in range(draw(st.integers(1, 12))):
        row = note(i, draw(st.sampled_from(INSTANTS)),
                   draw(st.sampled_from(["ok", "Flat hunting today.", "word " * 30, ""])),
                   draw(st.sampled_from(["Maya", None])))
        row["score"] = draw(st.floats(0, 1))
        if draw(st.integers(0, 4)) == 0:
            row["pinned"] = True
        rows.append(row)
    return rows


@PROPERTY_SETTINGS
@given(rows=day_rows(), budget=st.integers(60, 700), citations=st.booleans(),
       encoding=st.sampled_from(["o200k_base", "cl100k_base"]))
def test_time_lines_are_priced_exactly_as_they_render(rows, budget, citations, encoding):
    """The layout's running cost equals its recount after every add and removal, assembly
    never overshoots what the layout priced, and the rendered context prints a day's time
    lines exactly when its packed records carry two or more times."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        check_pack(monkeypatch, rows, budget, citations, encoding)


def check_pack(monkeypatch, rows, budget, citations, encoding) -> None:
    checked = []
    for name in ("add", "remove"):
        real = getattr(Layout, name)

        def step(self, *args, _real=real):
            _real(self, *args)
            assert self.used == self.recount()
            checked.append(1)

        monkeypatch.setattr(Layout, name, step)
    retries, priced = [], []
    real_assemble = pipeline.assemble

    def assemble(layout, **kwargs):
        # What the layout priced for everything but the metadata line, which it reserves at
        # its widest numbers.
        priced.append(layout.recount() - layout.metadata.cost())
        return real_assemble(layout, **kwargs) or retries.append(1)

    monkeypatch.setattr(pipeline, "assemble", assemble)
    config = {"context_citations": citations, "encoding": encoding, "overhead_tokens": 0}
    rows = [r for r in rows if r["content"]] or [note(0, None)]
    bundle = rms_duck.pack_candidates(rows, budget=budget, config=config)
    assert not retries  # the layout priced the context exactly
    assert bundle.tokens_used == rms_duck.count_tokens(bundle.context, encoding=encoding)
    assert bundle.tokens_used <= budget
    if bundle.included:
        body = bundle.context[:bundle.context.rindex("# metadata ")]
        assert priced[-1] == rms_duck.count_tokens(body, encoding=encoding)
    packed = set(bundle.included_ids)
    times: dict[str, set] = {}
    for row in rows:
        if row["id"] in packed and row["event_time"] is not None:
            when = datetime.fromisoformat(row["event_time"]).astimezone(UTC)
            times.setdefault(when.date().isoformat(), set())
            if when.time() != datetime.min.time():  # midnight is a date-only value: no time
                times[when.date().isoformat()].add(when.strftime("%H:%M:%S"))
    multi = sum(len(t) > 1 for t in times.values())
    shown = sum(bool(_TIME.fullmatch(line)) for line in reader_lines(bundle.context))
    event("a day with two times" if multi else "no day with two times")
    # Every day with two or more times prints one line per time.
    expected = sum(len(t) for t in times.values() if len(t) > 1)
    assert shown == expected, bundle.context
    assert checked or not bundle.included


def test_a_naive_time_is_read_as_utc_by_the_reader_and_kept_apart_by_compact():
    """docs/formats.md: a naive time prints its digits as they are, which is the UTC the
    reader's header names; compact, which prints instants, leaves the Z off."""
    def pack(when, fmt):
        row = {"id": "n1", "score": 0.9, "content": "Moved to Lisbon.", "event_time": when}
        return rms_duck.pack_candidates([row], budget=300,
                                        config={"context_format": fmt}).context

    naive, aware = datetime(2024, 3, 5, 17, 11), datetime(2024, 3, 5, 17, 11, tzinfo=UTC)
    assert pack(naive, "reader") == pack(aware, "reader")
    assert "dates are UTC" in pack(naive, "reader") and "\n5 Mar " in pack(naive, "reader")
    assert '"2024-03-05T17:11"' in pack(naive, "compact")
    assert '"2024-03-05T17:11Z"' in pack(aware, "compact")

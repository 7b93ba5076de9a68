"""text_states_date() looks for the year before it compiles a day's pattern: these check
that the shortcut never changes an answer, and that it spares the compile."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from hypothesis import example, given
from hypothesis import strategies as st

from rms_duck.formats import cues
from rms_duck.formats.base import clear_render_memos
from rms_duck.formats.cues import MATCH_SPAN, _date_pattern, text_states_date
from tests.test_budget_properties import PROPERTY_SETTINGS

_NAMES = ("january", "february", "march", "april", "may", "june", "july", "august",
          "september", "october", "november", "december")


def _always_compiled(text: str, when: datetime) -> bool:
    """The answer with the day's pattern always compiled and tried (before the shortcut)."""
    pattern = _date_pattern(when.year, when.month, when.day)
    group = cues._LEADING_GROUP.match(text)
    if group and pattern.search(group.group(1)):
        return True
    return pattern.match(text.lstrip(" \t([")) is not None


def test_no_pattern_matches_more_than_the_span_it_is_looked_for_in():
    # Bounded quantifiers only (?, and the {n} of the year's digits), so the longest match
    # is each form with every optional part present, at the longest month name and day.
    for month in range(1, 13):
        source = _date_pattern(2024, month, 28).pattern
        assert not re.search(r"[*+]|\{\d*,\}", source)
        name = _NAMES[month - 1]
        for day in (9, 28):
            longest = [f"2024-0{month}-0{day}", f"0{day}th of {name}., 2024",
                       f"{name}. 0{day}th, 2024"]
            pattern = _date_pattern(2024, month, day)
            for text in longest:
                assert pattern.fullmatch(text), text
                assert len(text) < MATCH_SPAN


def test_a_text_without_the_year_compiles_no_pattern():
    # The memo is a render memo: a cold pack (clear_render_memos) compiles them again.
    cues._PATTERNS.clear()
    when = datetime(2031, 3, 4, tzinfo=UTC)
    late = "[note] On 4 March the team met, and they said much later that 2031 came up."
    assert not text_states_date(late, when)
    assert not cues._PATTERNS
    assert text_states_date("(4 March 2031) The team met.", when)
    assert list(cues._PATTERNS) == [(2031, 3, 4)]
    clear_render_memos()
    assert not cues._PATTERNS


_YEARS = st.integers(1, 9999)


@st.composite
def _dated_texts(draw):
    when = datetime(draw(_YEARS), draw(st.integers(1, 12)), draw(st.integers(1, 28)),
                    tzinfo=UTC)
    # Mostly the record's own year, month and day, so about half the texts state it.
    year = draw(st.sampled_from([when.year] * 4 + [when.year + 1, max(when.year - 1, 1)]))
    month = draw(st.sampled_from([when.month] * 4 + [when.month % 12 + 1]))
    day = draw(st.sampled_from([when.day] * 4 + [when.day + 1, 31]))
    name = _NAMES[month - 1]
    name = draw(st.sampled_from([name, name[:3], name.upper(), name.title(), "Sept"]))
    suffix = draw(st.sampled_from(["", "th", "st"]))
    zero = draw(st.sampled_from(["", "0"]))
    sep = draw(st.sampled_from("--//. "))
    date = draw(st.sampled_from([
        f"{year:04d}{sep}{zero}{month}{sep}{zero}{day}",
        f"{zero}{day}{suffix} {name}, {year:04d}", f"{day}{suffix} of {name}. {year:04d}",
        f"{name} {zero}{day}{suffix}, {year:04d}", f"{name}. {day} {year:04d}"]))
    filler = draw(st.text(alphabet=" ([])-:,.0123456789abcSept\n", max_size=50))
    where = draw(st.sampled_from(["group", "group", "start", "start", "late", "filler only"]))
    inside = filler[:20].translate({ord(c): None for c in "()[]\n"})  # stays one group
    text = {"group": f"{draw(st.sampled_from(['', ' ', '  ']))}({inside}{date}) rest",
            "start": f"{draw(st.sampled_from(['', ' (', '[', chr(9)]))}{date}{filler}",
            "late": f"{filler}{' ' * draw(st.integers(0, 40))}{date}",
            "filler only": filler}[where]
    return text, when


@PROPERTY_SETTINGS
@given(_dated_texts())
@example(("(2024-3-4) x", datetime(2024, 3, 4, tzinfo=UTC)))
@example((" " * 30 + "4 March 2024", datetime(2024, 3, 4, tzinfo=UTC)))
@example(("[see 12024-03-04]", datetime(2024, 3, 4, tzinfo=UTC)))
def test_the_year_shortcut_gives_the_answer_of_the_pattern(case):
    text, when = case
    assert text_states_date(text, when) == _always_compiled(text, when)


def test_the_shortcut_agrees_at_every_offset_of_every_form():
    when = datetime(2024, 9, 4, 13, 5, tzinfo=UTC)
    forms = ["2024-09-04", "2024/9/4", "2024.09.4", "4 September 2024", "04th of Sept., 2024",
             "4th of sep 2024", "September 4, 2024", "SEPT. 04th, 2024", "sep 4 2024",
             "2024-09-05", "5 September 2024", "4 October 2024", "4 September 2025"]
    agreed = stated = 0
    for form in forms:
        for pad in range(0, 45):
            for text in (" " * pad + form, "x" * pad + form, f"({' ' * pad}{form})",
                         f"[{'y' * pad} {form}] rest", f"{form}{' ' * pad}tail"):
                assert text_states_date(text, when) == _always_compiled(text, when), text
                agreed += 1
                stated += _always_compiled(text, when)
    assert 0 < stated < agreed  # both answers were checked


def test_the_pattern_memo_stays_bounded(monkeypatch):
    monkeypatch.setattr(cues, "_PATTERNS_LIMIT", 2)
    cues._PATTERNS.clear()
    for day in range(1, 6):
        assert text_states_date(f"(2024-01-0{day}) x", datetime(2024, 1, day, tzinfo=UTC))
        assert 0 < len(cues._PATTERNS) <= 2

"""`rms-duck bench --text dialogue`: the speed bench on multilingual dialogue turns.

Shape and content only: no timing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import io

import pytest

from rms_duck import connect
from rms_duck.bench import perf
from rms_duck.bench.corpus import seed_texts
from rms_duck.bench.workload import BULK_CHECK_SQL, TEXTS, make_bulk_tables, make_rows
from rms_duck.cli import main
from rms_duck.cli.bench import add_arguments
from rms_duck.records import Candidate

_LANGUAGE_OF = {sentence: language for language, entry in seed_texts().items()
                for sentence in entry["sentences"]}


def _language(text: str) -> str:
    """The language of a turn's first sentence (a turn keeps its session's language)."""
    found = {_LANGUAGE_OF[s] for s in _LANGUAGE_OF if text.startswith(s)}
    assert len(found) == 1, text
    return found.pop()


def test_dialogue_rows_are_seeded_turns_in_every_shipped_language():
    rows = make_rows(3_000, seed=1, text="dialogue")
    assert rows == make_rows(3_000, seed=1, text="dialogue")
    assert rows != make_rows(3_000, seed=2, text="dialogue")
    assert len(rows) == 3_000 and all(set(row) == set(Candidate.__slots__) for row in rows)
    assert {_language(row["content"]) for row in rows} == set(seed_texts())
    assert {entry["script"] for entry in seed_texts().values()} >= {
        "Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Devanagari", "Thai", "Han", "Hangul"}
    # Real dialogue rarely repeats a turn word for word (folding packs repeats apart).
    assert len({row["content"] for row in rows}) >= 0.9 * len(rows)
    # Chinese and Japanese join their sentences without spaces, the others with one.
    for row in rows:
        assert (" " in row["content"]) != (_language(row["content"]) in {"zh", "ja"})
    assert all(row["speaker"] and row["event_time"] for row in rows)
    # Within a session the two speakers take turns, minutes apart, in one language.
    same_session = [(a, b) for a, b in zip(rows, rows[1:], strict=False)
                    if 0 < (b["event_time"] - a["event_time"]).total_seconds() <= 1_800
                    and _language(a["content"]) == _language(b["content"])]
    assert len(same_session) > 0.8 * len(rows)
    assert sum(a["speaker"] != b["speaker"] for a, b in same_session) > 0.95 * len(same_session)


def test_an_unknown_text_kind_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match=r"text must be one of notes, dialogue, got 'prose'"):
        make_rows(5, text="prose")


def test_dialogue_bulk_tables_pack_within_budget(enc):
    con = connect()
    make_bulk_tables(con, bundles=40, per_bundle=8, nodes=40, seed=0, text="dialogue")
    # Each candidate is one of the turns, with that turn's time and speaker.
    turns = {row["id"]: (row["content"], row["event_time"], row["speaker"])
             for row in make_rows(40, seed=0, text="dialogue")}
    picked = con.execute("SELECT id, content, event_time, speaker FROM bench_candidates"
                         ).fetchall()
    assert len(picked) == 320 and len({r[0] for r in picked}) > 20
    assert all(turns[node_id] == tuple(rest) for node_id, *rest in picked)
    packed = con.execute(BULK_CHECK_SQL, [512, 40]).fetchall()
    assert len(packed) == 40
    assert all(used == len(enc.encode_ordinary(context)) <= 412 for context, used in packed)
    assert any(not context.isascii() for context, _ in packed)


def test_the_text_option_sets_the_plan_and_refuses_other_values(capsys):
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    assert perf.plan_from_args(parser.parse_args(["--text", "dialogue"])).text == "dialogue"
    assert perf.plan_from_args(parser.parse_args([])).text == "notes"
    with pytest.raises(SystemExit):
        parser.parse_args(["--text", "prose"])
    assert "invalid choice: 'prose' (choose from" in capsys.readouterr().err
    # The option lists its choices literally (the CLI does not import the bench to start):
    # they must be the bench's texts.
    text_option = next(a for a in parser._actions if a.dest == "text")
    assert tuple(text_option.choices) == tuple(TEXTS)


@pytest.mark.slow
def test_the_target_rows_run_on_dialogue_and_say_so():
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["bench", "--smoke", "--only-targets", "--text", "dialogue",
                     "--repeats", "1"]) == 0
    text = out.getvalue()
    assert ("Candidates' texts: two-speaker dialogue turns in 16 languages and 10 scripts"
            in text.splitlines()[1])
    rows = [line for line in text.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == 8
    # The GROUP BY rows take at least three repetitions, the first printed apart.
    assert "the first repetition" in rows[6] and rows[6].endswith("3 runs |")
    assert rows[7].endswith("3 runs |")

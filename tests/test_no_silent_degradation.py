"""No silent degradation: empty contexts say why, min_score, a stale lexical index, and
what replay does not track. Reproductions of the newcomer review #10, #13, #17 and #18.
"""

from __future__ import annotations

import json

import duckdb
import pytest

import rms_duck
from rms_duck.cli.demo import examples_dir, load_memory
from rms_duck.duck.types import bundle_row
from rms_duck.errors import ConfigError

QUESTION = "When is the Heron cut-over?"


def _notes(n: int) -> list[dict]:
    return [{"id": str(i), "score": round(i / n, 3), "speaker": "Maya Okafor",
             "event_time": f"2026-11-{i % 28 + 1:02d}T09:00:00Z",
             "content": f"Team note {i}: the deploy checklist needs another review pass."}
            for i in range(n)]


def test_a_148_token_budget_with_dates_and_speakers_says_nothing_fit():
    # The review's 170 tokens pack one record since receipt version 5's shorter framing;
    # since version 6's, 152 do (51 tokens of 52 available), since version 8's (the day
    # line opens the record's line), 149 (49 of 49); 148 still packs none.
    assert len(rms_duck.pack_candidates(_notes(17), budget=149).included) == 1
    bundle = rms_duck.pack_candidates(_notes(17), budget=148)
    assert bundle.context == "" and bundle.tokens_used == 0
    assert bundle.flags == ("NOTHING_FIT",)
    (warning,) = bundle.warnings
    assert warning.startswith("none of 17 candidates was packed (17 BUDGET_EXHAUSTED)")
    assert "48 tokens were available (budget 148 minus overhead_tokens 100)" in warning
    assert "raise the budget or lower overhead_tokens" in warning
    assert bundle_row(bundle)["warnings"] == [warning]


def test_warnings_reach_sql_and_the_stored_flags(con):
    row = con.execute("SELECT b.flags, b.warnings FROM (SELECT pack_context("
                      "[{'id': 'a', 'score': 0.5, 'content': 'x'}], 101) AS b)").fetchall()[0]
    assert row[0] == ["NOTHING_FIT"] and "1 BUDGET_EXHAUSTED" in row[1][0]
    bundle = rms_duck.pack(con, "SELECT 'a' AS id, 0.5 AS score, 'x' AS content WHERE false",
                           budget=300)
    assert con.execute("SELECT flags FROM rms_bundles").fetchall() == [(["NO_CANDIDATES"],)]
    assert bundle.warnings[0].startswith("no candidates were given")


def test_min_score_excludes_low_scores_but_keeps_pins_and_active_tasks():
    notes = _notes(10) + [
        {"id": "pin", "score": 0.0, "content": "Always answer in English.", "pinned": True},
        {"id": "task", "score": 0.01, "content": "Finish the checklist.", "type": "task"}]
    plain = rms_duck.pack_candidates(notes, budget=4000)
    assert "0" in plain.included_ids  # the budget decides, not the score
    bundle = rms_duck.pack_candidates(notes, budget=4000, config={"min_score": 0.5})
    below = {r.id for r in bundle.excluded if r.reason.value == "BELOW_MIN_SCORE"}
    assert below == {"0", "1", "2", "3", "4"}
    assert {"pin", "task", "5", "9"} <= set(bundle.included_ids)
    decisions = {d["id"]: d for d in json.loads(bundle.receipt)["candidates"]}
    assert decisions["0"]["reason"] == "BELOW_MIN_SCORE" and decisions["0"]["tokens"] == 0
    everything = rms_duck.pack_candidates(_notes(10), budget=4000, config={"min_score": 0.95})
    assert everything.flags == ("NOTHING_FIT",)
    assert "every candidate scored below min_score 0.95" in everything.warnings[0]


@pytest.mark.parametrize("value", [-0.1, 1.5, "high", True, float("nan")])
def test_min_score_must_be_in_the_unit_interval(value):
    with pytest.raises(ConfigError, match=r"config field 'min_score' must be a number in "
                                          r"\[0, 1\], got"):
        rms_duck.pack_candidates([], budget=100, config={"min_score": value})


@pytest.fixture
def demo_con():
    con = rms_duck.connect()
    load_memory(con, json.loads((examples_dir() / "agent_memory.json").read_text()))
    yield con
    con.close()


def test_rms_candidates_refuses_an_index_that_was_never_built(demo_con):
    with pytest.raises(duckdb.Error, match=r"lexical index is out of date \(\d+ of \d+ nodes "
                                           r"not indexed.*rms_duck.refresh_index\(con\)"):
        demo_con.execute("SELECT * FROM rms_candidates(?, 'maya')", [QUESTION]).fetchall()
    stale = demo_con.execute("SELECT count(*) FROM rms_candidates(?, 'maya', stale_ok := true)",
                             [QUESTION]).fetchall()[0][0]
    assert stale <= 5  # pins and tasks only: what the review saw as "3 instead of 20"


@pytest.mark.slow
def test_pack_refreshes_the_index_before_ranking(demo_con):
    sql = "SELECT * FROM rms_candidates(?, 'maya')"
    bundle = rms_duck.pack(demo_con, sql, params=[QUESTION], budget=4096, store=False)
    assert len(bundle.included) + len(bundle.excluded) >= 20
    assert demo_con.execute("SELECT missing, stale FROM rms_lexical_index_status()"
                            ).fetchall() == [(0, 0)]
    demo_con.execute("UPDATE rms_nodes SET content = content || ' (edited)' WHERE id IN "
                     "(SELECT id FROM rms_nodes LIMIT 2)")
    with pytest.raises(duckdb.Error, match=r"\(0 of \d+ nodes not indexed, 2 changed since\)"):
        demo_con.execute(sql, [QUESTION]).fetchall()
    again = rms_duck.pack(demo_con, sql, params=[QUESTION], budget=4096, store=False)
    assert len(again.included) + len(again.excluded) >= 20


def test_replay_names_the_tables_it_does_not_track(con):
    con.execute("CREATE TABLE notes (id INTEGER, body VARCHAR, s DOUBLE)")
    con.execute("INSERT INTO notes VALUES (48, 'Deploy failed on node 3', 0.9), "
                "(49, 'All green after the retry', 0.5)")
    bundle = rms_duck.pack(con, "SELECT id, body AS content, s AS score FROM notes",
                           budget=300)
    con.execute("UPDATE notes SET body = 'EDITED: nothing failed' WHERE id = 48")
    result = rms_duck.replay(con, bundle.receipt_id)
    assert result.identical  # the recorded inputs still replay
    assert result.tables_read == ("notes",) and result.untracked_tables == ("notes",)
    assert result.changed_nodes == () and result.missing_nodes == ("48", "49")
    assert "edits to notes (read by the ranking query) are not tracked" in result.tracking
    con.execute("INSERT INTO rms_nodes (id, content) VALUES (uuid(), 'a node')")
    ranked = rms_duck.pack(con, "SELECT CAST(id AS VARCHAR) AS id, 0.5 AS score, content "
                                "FROM rms_nodes", budget=300)
    assert rms_duck.replay(con, ranked.receipt_id).untracked_tables == ()


def test_min_score_is_recorded_only_when_set_and_replays(con):
    plain = rms_duck.pack_candidates(_notes(4), budget=400)
    assert "min_score" not in json.loads(plain.receipt)["config"]  # version-1 bytes kept
    import pyarrow as pa

    stored = rms_duck.pack(con, pa.Table.from_pylist(_notes(4)), budget=400,
                           config={"min_score": 0.5})
    assert json.loads(stored.receipt)["config"]["min_score"] == 0.5
    result = rms_duck.replay(con, stored.receipt_id)
    assert result.identical and result.same_decisions

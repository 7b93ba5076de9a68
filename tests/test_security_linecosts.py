"""Adversarial review H3 and M5: a poisoned rms_line_costs never changes a pack or a receipt
silently, `rms-duck audit --line-costs` finds wrong rows, and the line cache and the floor,
date-line and render memos are bounded."""

from __future__ import annotations

import warnings
from datetime import UTC

import pytest

import rms_duck
from rms_duck.candidates import to_candidates
from rms_duck.cli import main
from rms_duck.errors import RmsWarning
from rms_duck.tokens import counter as counter_module
from rms_duck.tokens.counter import LineCounter, cache_bytes, clear_line_cache, cost_bounds
from rms_duck.tokens.encodings import DEFAULT_ENCODING

Q = "SELECT CAST(id AS VARCHAR) AS id, 0.5 AS score, content FROM rms_nodes"


@pytest.fixture
def h3_db(tmp_path):
    path = str(tmp_path / "h3.duckdb")
    con = rms_duck.connect(path)
    con.execute("INSERT INTO rms_nodes (id, content) SELECT uuid(), 'Fact ' || i || ': service ' "
                "|| i || ' listens on port ' || (8000 + i) FROM range(60) t(i)")
    clear_line_cache()
    clean = rms_duck.pack(con, Q, budget=600)  # tokenizes every line and persists the costs
    assert con.execute("SELECT count(*) FROM rms_line_costs").fetchone()[0] > 0
    con.close()
    return path, clean


@pytest.mark.slow
@pytest.mark.parametrize("poison", [100_000, 0, 1, -1000, 3])
def test_a_poisoned_cost_cache_changes_nothing_and_is_reported(h3_db, poison):
    path, clean = h3_db
    con = rms_duck.connect(path)
    con.execute(f"UPDATE rms_line_costs SET n_tokens = {poison}")
    clear_line_cache()  # a fresh process: only the persisted costs are known
    with pytest.warns(RmsWarning, match="rms_line_costs held .* wrong cost"):
        bundle = rms_duck.pack(con, Q, budget=600)
    assert bundle.context == clean.context
    assert [r.tokens for r in bundle.included] == [r.tokens for r in clean.included]
    assert rms_duck.verify_receipts(con) == []
    assert rms_duck.replay(con, bundle.receipt_id).identical
    # Storing repaired the rows this pack met: the next fresh pack meets none.
    clear_line_cache()
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error", RmsWarning)
        assert rms_duck.pack(con, Q, budget=600, store=False).context == clean.context
    con.close()


@pytest.mark.slow
def test_two_wrong_costs_that_add_up_right_change_nothing_and_are_reported(con):
    """One cost too high and one too low by as much: the whole-output count matches their
    sum, yet they choose other records. Each loaded cost of a context line is confirmed by
    the output's own tokens on that line."""
    import pyarrow as pa

    from rms_duck.duck.linecosts import store_line_costs

    rows = [{"id": "l1", "score": 0.9, "content": "Supercalifragilistic expialidocious wording"},
            {"id": "x", "score": 0.8, "content": "The egress rules belong to Jonas since March"},
            {"id": "l2", "score": 0.7, "content": "Antidisestablishmentarianism noted"}]
    config = {"overhead_tokens": 0, "context_guidance_mode": "off"}
    full = rms_duck.pack_candidates(rows, budget=5000, config=config).context
    line = {r["id"]: next(x for x in full.split("\n") if r["content"] in x) for r in rows}
    exact = LineCounter(shared=False)
    changed = 0
    for budget in range(40, 90):
        honest = rms_duck.pack_candidates(rows, budget=budget, config=config,
                                          counter=LineCounter(shared=False))
        con.execute("DELETE FROM rms_line_costs")
        store_line_costs(con, {line["l1"]: exact.line_cost(line["l1"]) + 1,
                               line["l2"]: exact.line_cost(line["l2"]) - 1})
        clear_line_cache()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            bundle = rms_duck.pack(con, pa.Table.from_pylist(rows), budget=budget,
                                   config=config)
        assert bundle.context == honest.context, budget
        assert rms_duck.replay(con, bundle.receipt_id).identical
        changed += any(isinstance(w.message, RmsWarning) for w in caught)
    assert changed  # the wrong rows were seen, reported and corrected


def test_a_line_cost_cache_that_cannot_be_written_does_not_fail_a_stored_pack(con,
                                                                               monkeypatch):
    # The bundle and receipt commit first; an error writing the cache after them (a full
    # disk) failed the pack, so a caller would pack and store it a second time.
    import duckdb

    from rms_duck.duck import api

    def full_disk(*args, **kwargs):
        raise duckdb.IOException("IO Error: could not write file: No space left on device")

    monkeypatch.setattr(api, "persist_counter", full_disk)
    with pytest.warns(RmsWarning, match="the bundle is stored .* No space left on device"):
        bundle = rms_duck.pack(con, "SELECT 'a' AS id, 0.5 AS score, 'x' AS content",
                               budget=300)
    assert con.execute("SELECT CAST(receipt_id AS VARCHAR) FROM rms_receipts").fetchall() == [
        (bundle.receipt_id,)]


def test_loaded_costs_outside_their_bounds_are_refused():
    counter = LineCounter("cl100k_base")
    line = "- service 7 listens on port 8007"
    low, high = cost_bounds(line, counter.max_token_chars)
    assert low <= counter.exact(line) <= high
    counter.prime([(line, high + 1), ("other words here", 0)])
    assert counter.rejected == {line: high + 1, "other words here": 0}
    assert counter.cached_cost(line) in (None, counter.exact(line))


@pytest.mark.slow
def test_audit_recounts_the_line_cost_table(h3_db, capsys):
    path, _ = h3_db
    assert main(["audit", "--db", path, "--line-costs"]) == 0
    assert "line costs  OK" in capsys.readouterr().out
    con = rms_duck.connect(path)
    report = rms_duck.check_line_costs(con)
    assert report.ok and report.checked == report.rows > 0
    con.execute("UPDATE rms_line_costs SET n_tokens = n_tokens + 1 WHERE line_sha256 IN "
                "(SELECT line_sha256 FROM rms_line_costs ORDER BY line_sha256 LIMIT 2)")
    con.close()
    assert main(["audit", "--db", path, "--line-costs"]) == 1
    out = capsys.readouterr().out
    assert "line costs  FAILED: 2 wrong row(s)" in out and out.count("  WRONG ") == 2


@pytest.mark.slow
def test_the_process_line_cache_is_capped_by_bytes(monkeypatch):
    clear_line_cache()
    monkeypatch.setattr(counter_module, "CACHE_BYTES", 4 * 1024 * 1024)
    for i in range(40):  # 40 distinct records of about 300 kB each: 12 MB of lines
        rms_duck.pack_candidates([{"id": f"b{i}", "score": 0.5,
                                   "content": f"{i} " + "lorem ipsum " * 25_000}], budget=200_000)
    assert 0 < cache_bytes(DEFAULT_ENCODING) <= 4 * 1024 * 1024
    clear_line_cache()
    assert cache_bytes() == 0


def test_the_render_memo_is_capped_by_bytes(monkeypatch):
    """M5's RSS growth came from the per-format render memo (16,384 entries, each keeping a
    view and its line alive): 300 packs of one distinct 1 MB record grew RSS by 670 MB."""
    import sys

    from rms_duck.formats import base

    monkeypatch.setattr(base, "_MEMO_BYTES", 4 * 1024 * 1024)
    base.clear_render_memos()
    for i in range(200):  # 200 distinct records of about 20 kB: 8 MB of lines
        rms_duck.pack_candidates([{"id": f"m{i}", "score": 0.5,
                                   "content": f"{i} " + "dolor sit " * 2_000}], budget=50_000)
    held = sum(2 * sys.getsizeof(line) for memo in base._MEMOS for line in memo.values())
    assert 0 < held <= 4 * 1024 * 1024 * len(base._MEMOS)
    big = "x " * 200_000  # a line larger than a 64th of the cap is never kept
    rms_duck.pack_candidates([{"id": "big", "score": 0.5, "content": big}], budget=500_000)
    assert not any(big in line for memo in base._MEMOS for line in memo.values())


def test_the_floor_memo_is_capped_by_characters(monkeypatch):
    """Token floors are remembered for long texts too (a warm pack looks every candidate's
    up), so the memo is bounded by the characters it keeps, not only by entries."""
    monkeypatch.setattr(counter_module, "_FLOOR_CHARS", 200_000)
    clear_line_cache()
    counter = counter_module.LineCounter(DEFAULT_ENCODING)
    texts = [f"{i} " + "amet consectetur " * 600 for i in range(60)]  # ~10 kB each: 600 kB
    floors = [counter.lower_bound(text) for text in texts]
    kept = counter_module._FLOORS[DEFAULT_ENCODING]
    assert 0 < sum(map(len, kept)) <= 200_000
    assert texts[-1] in kept and texts[0] not in kept  # the oldest went first
    # A floor recomputed after eviction is the same floor.
    assert [counter.lower_bound(text) for text in texts] == floors
    huge = "y " * 20_000  # longer than _FLOOR_TEXT_CHARS: computed, never kept
    assert counter.lower_bound(huge) >= 20_000
    assert huge not in kept
    clear_line_cache()
    assert not counter_module._FLOORS[DEFAULT_ENCODING]


def test_the_date_line_memo_is_bounded_and_keyed_by_instant_and_text(monkeypatch):
    from datetime import datetime, timedelta, timezone

    from rms_duck.formats import reader
    from rms_duck.formats.base import RecordView, clear_render_memos
    from rms_duck.records import Level

    monkeypatch.setattr(reader, "_DATE_MEMO_LIMIT", 64)
    clear_render_memos()
    fmt = reader.ReaderFormat()
    start = datetime(2024, 3, 1, 9, 30, tzinfo=UTC)

    def lines(when, text):
        c = to_candidates([{"id": "d", "score": 0.5, "content": text, "event_time": when}])[0]
        return fmt.date_lines(RecordView(c, Level.FULL, text, None))

    months = "Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split()
    for i in range(300):
        day = start + timedelta(days=i)
        assert lines(day, "plain words") == (
            str(day.year), f"{day.day} {months[day.month - 1]}", "09:30")
    assert 0 < len(reader._DATE_LINES) <= 64
    # The same instant in another zone prints the same UTC lines; a text that states its
    # own date prints none, whatever was remembered for the instant.
    plus_two = start.astimezone(timezone(timedelta(hours=2)))
    assert lines(plus_two, "plain words") == lines(start, "plain words") \
        == ("2024", "1 Mar", "09:30")
    assert lines(start, "2024-03-01: moved house") == ()
    long_text = "word " * 200  # over _DATE_MEMO_CHARS: computed, not kept
    assert lines(start, long_text) == ("2024", "1 Mar", "09:30")
    assert all(key[1] != long_text for key in reader._DATE_LINES)


def test_the_floor_memo_never_passes_its_character_cap(monkeypatch):
    """Review finding: evicting the oldest quarter by count did not always bring the total
    under the cap (many tiny texts, then long ones): evict until it does."""
    monkeypatch.setattr(counter_module, "_FLOOR_CHARS", 100_000)
    clear_line_cache()
    counter = counter_module.LineCounter(DEFAULT_ENCODING)
    kept = counter_module._FLOORS[DEFAULT_ENCODING]
    for i in range(3_000):
        counter.lower_bound(f"w{i}")
    for i in range(40):
        counter.lower_bound(f"{i} " + "z" * 9_000)
        assert sum(map(len, kept)) <= 100_000
        assert counter_module._FLOOR_SIZES[DEFAULT_ENCODING][0] == sum(map(len, kept))
    clear_line_cache()


def test_the_date_line_memo_tells_the_two_sides_of_a_dst_fold_apart():
    """Review finding: 01:30 on the night New York leaves DST is two instants; aware times in
    that zone compare equal across the fold, so such times are never remembered."""
    from datetime import datetime
    from zoneinfo import ZoneInfo

    from rms_duck.formats import reader
    from rms_duck.formats.base import RecordView, clear_render_memos
    from rms_duck.records import Candidate, Level

    clear_render_memos()
    fmt = reader.ReaderFormat()
    zone = ZoneInfo("America/New_York")
    lines = []
    for fold in (0, 1):
        when = datetime(2023, 11, 5, 1, 30, tzinfo=zone, fold=fold)
        c = Candidate(id="d", score=0.5, content="plain words", event_time=when)
        lines.append(fmt.date_lines(RecordView(c, Level.FULL, c.content, None)))
    assert lines == [("2023", "5 Nov", "05:30"), ("2023", "5 Nov", "06:30")]

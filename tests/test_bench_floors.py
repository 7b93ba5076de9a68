"""The bench's floors (bench/handover.py): pack_context's own macro over a UDF that hands a
ready bundle back, and one INSERT of a stored pack's texts. Timings are the bench's to
print; these check that the floors measure the same query and the same bytes."""

from __future__ import annotations

import pytest

import rms_duck
from rms_duck.bench import handover
from rms_duck.bench.handover import (
    HANDOVER_MACRO,
    WRITE_FLOOR_TABLE,
    handover_macro_sql,
    install_handover,
    install_write_floor,
    write_floor,
)

_LIST = "list({'id': id, 'score': score, 'content': content, 'speaker': speaker})"


def _connection():
    con = rms_duck.connect()
    con.execute("CREATE TEMP TABLE notes AS SELECT * FROM (VALUES ('a', 0.9, 'first note', "
                "'Maya'), ('b', 0.5, 'second note', NULL)) AS t(id, score, content, speaker)")
    install_handover(con)
    return con


def test_the_handover_macro_is_pack_contexts_with_only_the_udf_renamed():
    text = handover_macro_sql()
    assert f"MACRO {HANDOVER_MACRO}(candidates, budget)" in text
    assert "rms_pack_udf" not in text and text.count("rms_bench_handover_udf(") == 2
    # Everything else, the argument checks and their messages included, is pack_context's.
    original = text.replace("rms_bench_handover_udf(", "rms_pack_udf(").replace(
        HANDOVER_MACRO, "pack_context")
    assert original in handover.read_sql("python_macros.sql")


def test_the_handover_returns_the_bundle_pack_context_returns_without_packing_again(
        monkeypatch):
    con = _connection()
    expected = con.execute(f"SELECT pack_context({_LIST}, 400) FROM notes").fetchall()
    first = con.execute(f"SELECT {HANDOVER_MACRO}({_LIST}, 400) FROM notes").fetchall()
    assert first == expected
    # From the second call on it hands the first bundle back: no pack runs.
    from rms_duck.duck import udfs

    def refuse(*args):
        raise AssertionError("the hand-over packed again")

    monkeypatch.setattr(udfs, "pack_udf", refuse)
    assert con.execute(f"SELECT {HANDOVER_MACRO}({_LIST}, 400) FROM notes").fetchall() == expected


def test_the_handover_checks_its_arguments_as_pack_context_does():
    con = _connection()
    for name in ("pack_context", HANDOVER_MACRO):
        with pytest.raises(Exception, match="aggregate ranked rows") as caught:
            con.execute(f"SELECT {name}(42, 400)").fetchall()
        assert "pack_context" in str(caught.value)


def test_the_handover_refuses_a_second_list_in_one_call():
    con = _connection()
    con.execute("SET threads = 1")  # both groups in one chunk, so in one call of the UDF
    con.execute(f"SELECT {HANDOVER_MACRO}({_LIST}, 400) FROM notes").fetchall()
    with pytest.raises(Exception, match=r"holds 1 bundle\(s\) for 2 candidate list\(s\)"):
        con.execute(f"SELECT {HANDOVER_MACRO}({_LIST}, 400) FROM notes GROUP BY id").fetchall()


def test_a_changed_macro_file_fails_the_bench_loudly(monkeypatch):
    monkeypatch.setattr(handover, "read_sql", lambda name: "CREATE TEMP MACRO other() AS 1;\n")
    with pytest.raises(RuntimeError, match="no longer defines pack_context"):
        handover_macro_sql()
    single = ("CREATE OR REPLACE TEMP MACRO pack_context(candidates, budget) AS "
              "rms_pack_udf(candidates, budget, NULL);\n")
    monkeypatch.setattr(handover, "read_sql", lambda name: single)
    with pytest.raises(RuntimeError, match="both overloads"):
        handover_macro_sql()


def test_the_write_floor_writes_a_stored_packs_texts_into_the_stored_types():
    con = rms_duck.connect()
    bundle = rms_duck.pack(con, "SELECT 'n1' AS id, 0.5 AS score, 'a note' AS content",
                           budget=400)
    inputs, receipt = con.execute(
        "SELECT CAST(b.inputs AS VARCHAR), r.receipt FROM rms_receipts r JOIN rms_bundles b "
        "USING (bundle_id) WHERE receipt_id = ?", [bundle.receipt_id]).fetchall()[0]
    install_write_floor(con)
    write_floor(con, inputs, receipt)
    assert con.execute(f"SELECT CAST(inputs AS VARCHAR), receipt, typeof(inputs) "
                       f"FROM {WRITE_FLOOR_TABLE}").fetchall() == [(inputs, receipt, "JSON")]
    # As in rms_bundles, the JSON column checks what it is given.
    with pytest.raises(Exception, match="(?i)json"):
        write_floor(con, "{not json", receipt)


def test_the_bare_floor_hands_back_the_same_bundle_from_the_uncast_list(monkeypatch):
    con = _connection()
    bare = f"SELECT {handover.BARE_UDF}({_LIST}, CAST(400 AS BIGINT)) FROM notes"
    with pytest.raises(Exception, match="call that first"):
        con.execute(bare).fetchall()  # nothing made yet: it never packs
    expected = con.execute(f"SELECT {HANDOVER_MACRO}({_LIST}, 400) FROM notes").fetchall()
    from rms_duck.duck import udfs

    def refuse(*args):
        raise AssertionError("the bare floor packed")

    monkeypatch.setattr(udfs, "pack_udf", refuse)
    assert con.execute(bare).fetchall() == expected

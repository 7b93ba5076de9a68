"""The persistent stand-ins a plain DuckDB client finds (sql/python_stubs.sql) must raise
their "call rms_duck.register(con)" error whatever expression they sit in. DuckDB folds an
expression over an untyped error() to NULL without raising it, so until the stubs were typed,
`pack_context(...).context` or `rms_token_count(t) + 1` quietly returned NULL."""

from __future__ import annotations

import re

import duckdb
import pytest

import rms_duck
from rms_duck.errors import RmsWarning

LIST = "[{'id': 'a', 'score': 0.5, 'content': 'Maya moved to Lisbon.'}]"


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    """A database rms_duck created, opened by a client that never registered rms_duck."""
    path = str(tmp_path_factory.mktemp("stubs") / "m.duckdb")
    rms_duck.connect(path).close()
    con = duckdb.connect(path)
    yield con
    con.close()


@pytest.mark.parametrize(("sql", "fn"), [
    (f"SELECT pack_context({LIST}, 300).context", "pack_context"),
    (f"SELECT length(pack_context({LIST}, 300, '{{}}').context)", "pack_context"),
    (f"SELECT pack_context({LIST}, 300).tokens_used + 1", "pack_context"),
    ("SELECT rms_token_count('hello') + 1", "rms_token_count"),
    ("SELECT sum(rms_token_count('x' || i)) FROM range(3) t(i)", "rms_token_count"),
    ("SELECT rms_token_estimate('hello', 4.2) * 2", "rms_token_estimate"),
    (f"SELECT length(rms_store({LIST}, 300))", "rms_store"),
    ("SELECT count(*) FROM rms_replay()", "rms_replay"),
    ("SELECT 1 FROM rms_replay(rid := 'r')", "rms_replay"),
    # The query docs/audits.md shows: the stand-in had only an `error` column, so a plain
    # client got "Referenced column "seq" not found" instead of what to do.
    ("SELECT seq, identical, inputs_intact, changed_nodes, error FROM rms_replay()",
     "rms_replay"),
    ("SELECT receipt_id FROM rms_replay() WHERE NOT reproduced", "rms_replay"),
])
def test_a_stub_raises_inside_any_expression(plain, sql, fn):
    with pytest.raises(duckdb.Error, match=re.escape(f"{fn}() runs Python: call "
                                                     "rms_duck.register(con)")):
        plain.execute(sql).fetchall()


@pytest.mark.parametrize("call", [f"pack_context({LIST}, 300)", "rms_token_count('hello')",
                                  "rms_token_estimate('hello')", f"rms_store({LIST}, 300)"])
def test_each_stub_has_the_type_of_the_macro_it_stands_in_for(plain, call):
    """Bound, not run: DESCRIBE shows the type a query would return."""
    con = rms_duck.connect()
    real = con.execute(f"DESCRIBE SELECT {call} AS v").fetchall()[0][1]
    con.close()
    assert plain.execute(f"DESCRIBE SELECT {call} AS v").fetchall()[0][1] == real


def test_the_replay_stub_has_the_columns_of_the_macro_it_stands_in_for(plain):
    con = rms_duck.connect()
    real = con.execute("DESCRIBE SELECT * FROM rms_replay()").fetchall()
    con.close()
    assert plain.execute("DESCRIBE SELECT * FROM rms_replay()").fetchall() == real


def test_a_registered_connection_to_the_same_file_packs_through_the_real_macros(plain):
    """The stubs stay in the file; register() shadows them on the connection it prepares."""
    registered = rms_duck.register(plain.cursor())
    assert registered.execute(f"SELECT pack_context({LIST}, 300).tokens_used").fetchall()[0][0] > 0
    with pytest.raises(duckdb.Error, match=re.escape("pack_context() runs Python")):
        plain.execute(f"SELECT pack_context({LIST}, 300).tokens_used").fetchall()
    registered.close()


def test_a_replaced_pack_context_stand_in_is_reported_and_restored(tmp_path):
    """Verification compared only rms_* objects, so a file whose pack_context stand-in was
    replaced (plain clients then read whatever it returns) verified clean (review of the
    typed stubs)."""
    path = str(tmp_path / "m.duckdb")
    con = rms_duck.connect(path)
    con.execute("CREATE OR REPLACE MACRO pack_context(candidates, budget) AS NULL")
    problems = [(p.problem, p.detail) for p in rms_duck.verify_receipts(con)]
    assert [code for code, _ in problems] == ["STORED_OBJECT_CHANGED"]
    assert "macro pack_context" in problems[0][1]
    con.close()
    with pytest.warns(RmsWarning, match="restored the shipped definitions of "
                                                 "pack_context"):
        con = rms_duck.connect(path)
    assert rms_duck.verify_receipts(con) == []
    con.close()


def _file_with_the_earlier_replay_stub(path: str) -> None:
    """As a release before 2026-12-04 left it: the one-column stand-in (and the earlier
    rms_receipt_id) and that release's digest of the persistent macros."""
    from rms_duck.duck.shipped import _EARLIER_MACROS

    rms_duck.connect(path).close()
    plain = duckdb.connect(path)
    for text in _EARLIER_MACROS.values():
        plain.execute(text.replace("CREATE MACRO", "CREATE OR REPLACE MACRO"))
    plain.execute("UPDATE rms_schema_version SET sql_sha256 = 'earlier' WHERE version = 2")
    plain.close()


def _verifies_read_only_then_upgrades_silently(path: str) -> duckdb.DuckDBPyConnection:
    """Verify the file read-only, connect writable once (no warning may be raised), and
    return a plain read-only connection to the upgraded file, which verifies too."""
    import warnings

    plain = duckdb.connect(path, read_only=True)
    assert rms_duck.verify_receipts(plain) == []
    plain.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rms_duck.connect(path).close()
    plain = duckdb.connect(path, read_only=True)
    assert rms_duck.verify_receipts(plain) == []
    return plain


def test_a_file_with_the_earlier_replay_stub_verifies_and_is_upgraded_silently(tmp_path):
    path = str(tmp_path / "earlier.duckdb")
    _file_with_the_earlier_replay_stub(path)
    plain = _verifies_read_only_then_upgrades_silently(path)
    with pytest.raises(duckdb.Error, match=re.escape("rms_replay() runs Python")):
        plain.execute("SELECT seq FROM rms_replay()").fetchall()
    plain.close()


def _file_of_the_release_before_the_ranking_checks(path: str) -> None:
    """As rms_duck left a file until 2026-12-04: the ranking macros of
    sql/earlier_macros.sql, no rms_bm25_k1 (which the argument checks added), and that
    release's digest of the persistent macros."""
    from rms_duck.duck.shipped import EARLIER_MACRO_FILE
    from rms_duck.duck.sqlfiles import read_sql

    rms_duck.connect(path).close()
    plain = duckdb.connect(path)
    plain.execute(read_sql(EARLIER_MACRO_FILE))
    plain.execute("DROP MACRO rms_bm25_k1")
    plain.execute("DROP MACRO rms_count_arg")
    plain.execute("UPDATE rms_schema_version SET sql_sha256 = 'earlier' WHERE version = 2")
    plain.close()


def _file_of_the_release_before_the_count_checks(path: str) -> None:
    """As the release after that left a file: today's ranking macros but the earlier
    rms_feedback_terms and rms_specificity, which took docs, terms and rare_df unchecked,
    and no rms_count_arg."""
    from rms_duck.duck.shipped import EARLIER_MACRO_FILE
    from rms_duck.duck.sqlfiles import read_sql

    rms_duck.connect(path).close()
    plain = duckdb.connect(path)
    for statement in duckdb.extract_statements(read_sql(EARLIER_MACRO_FILE)):
        if re.search(r"MACRO (rms_feedback_terms|rms_specificity)\(", statement.query):
            plain.execute(statement.query)
    plain.execute("DROP MACRO rms_count_arg")
    plain.execute("UPDATE rms_schema_version SET sql_sha256 = 'earlier' WHERE version = 2")
    plain.close()


def test_a_file_of_the_previous_release_verifies_read_only_and_is_upgraded_silently(tmp_path):
    """An untouched file made the day before reported its ranking macros as changed and
    rms_bm25_k1 as missing, so `rms-duck audit` of it failed until a writable connect."""
    path = str(tmp_path / "earlier.duckdb")
    _file_of_the_release_before_the_ranking_checks(path)
    plain = _verifies_read_only_then_upgrades_silently(path)
    assert plain.execute("SELECT count(*) FROM duckdb_functions() "
                         "WHERE function_name = 'rms_bm25_k1'").fetchall() == [(1,)]
    plain.close()


def test_a_file_of_the_release_before_the_count_checks_verifies_and_is_upgraded(tmp_path):
    """Its rms_feedback_terms and rms_specificity differ from today's, and it has no
    rms_count_arg: an untouched file of that release must still verify read-only."""
    path = str(tmp_path / "earlier.duckdb")
    _file_of_the_release_before_the_count_checks(path)
    plain = _verifies_read_only_then_upgrades_silently(path)
    with pytest.raises(duckdb.Error, match="rms_specificity: rare_df must be a whole number"):
        plain.execute("SELECT * FROM rms_specificity(rare_df := -1)").fetchall()
    plain.close()


@pytest.mark.parametrize("name", ["rms_bm25_k1", "rms_count_arg"])
def test_a_current_file_missing_an_object_of_this_release_is_reported(tmp_path, name):
    path = str(tmp_path / "current.duckdb")
    rms_duck.connect(path).close()
    plain = duckdb.connect(path)
    plain.execute(f"DROP MACRO {name}")
    plain.close()
    plain = duckdb.connect(path, read_only=True)
    assert [(p.problem, p.object_name) for p in rms_duck.verify_receipts(plain)] == [
        ("STORED_OBJECT_MISSING", name)]
    plain.close()

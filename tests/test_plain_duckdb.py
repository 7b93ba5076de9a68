"""Plain DuckDB can audit and rank: the pure-SQL macros persist with the schema.

Reproductions of the newcomer review #11 and the ecosystem review ("macros in other
clients"): a duckdb connection that never imported rms_duck calls rms_verify_receipts(),
rms_receipt_candidates(), rms_candidates() and rms_bm25(); Python-backed macros say to call
rms_duck.register(con), and register() replaces them.
"""

from __future__ import annotations

import duckdb
import pytest

import rms_duck
from rms_duck.duck.macros import MACROS_VERSION, persistent_digest

NOTES = ["The Heron cut-over moved to the weekend of 2026-12-19.",
         "Rollback plan: keep the old Heron cluster read-only for 48 hours.",
         "The canteen serves lasagne on Fridays."]


@pytest.fixture
def db(tmp_path):
    path = str(tmp_path / "memory.duckdb")
    con = rms_duck.connect(path)
    for i, text in enumerate(NOTES):
        con.execute("INSERT INTO rms_nodes (id, content, namespace_id) VALUES (?, ?, 'team')",
                    [f"00000000-0000-0000-0000-00000000000{i}", text])
    bundle = rms_duck.pack(con, "SELECT * FROM rms_candidates('Heron cut-over', 'team')",
                           budget=400)
    con.close()
    return path, bundle


@pytest.mark.slow
def test_plain_client_verifies_explains_and_ranks(db):
    path, bundle = db
    plain = duckdb.connect(path)
    try:
        assert plain.execute("SELECT * FROM rms_verify_receipts()").fetchall() == []
        decided = plain.execute("SELECT node_id, decision FROM rms_receipt_candidates(?)",
                                [bundle.receipt_id]).fetchall()
        assert sorted(d[0] for d in decided) == sorted(bundle.included_ids + bundle.excluded_ids)
        ranked = plain.execute("SELECT id FROM rms_candidates('Heron cut-over', 'team')"
                               ).fetchall()
        assert {r[0] for r in ranked[:2]} == {"00000000-0000-0000-0000-000000000000",
                                              "00000000-0000-0000-0000-000000000001"}
        assert plain.execute("SELECT count(*) FROM rms_bm25('heron')").fetchall() == [(2,)]
        # Tamper in plain SQL; plain SQL sees it.
        plain.execute("UPDATE rms_bundles SET context = context || 'x'")
        problems = {r[0] for r in plain.execute(
            "SELECT problem FROM rms_verify_receipts()").fetchall()}
        assert "CONTEXT_MISMATCH" in problems
    finally:
        plain.close()


@pytest.mark.parametrize("sql, name", [
    ("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'x'}], 100)", "pack_context"),
    ("SELECT rms_token_count('hello')", "rms_token_count"),
    ("SELECT rms_token_estimate('hello')", "rms_token_estimate"),
    ("SELECT rms_store([{'id': 'a', 'score': 0.5, 'content': 'x'}], 100)", "rms_store"),
    ("SELECT * FROM rms_replay()", "rms_replay"),
])
@pytest.mark.slow
def test_python_backed_macros_say_to_register(db, sql, name):
    plain = duckdb.connect(db[0])
    try:
        with pytest.raises(duckdb.Error, match=rf"{name}\(\) runs Python: call "
                                               r"rms_duck.register\(con\)"):
            plain.execute(sql).fetchall()
        rms_duck.register(plain)
        assert plain.execute(sql).fetchall()  # the real macro now answers
    finally:
        plain.close()


@pytest.mark.slow
def test_macros_are_versioned_with_the_schema(db):
    path, _ = db
    con = duckdb.connect(path)
    try:
        rows = con.execute("SELECT sql_sha256 FROM rms_schema_version WHERE version = ?",
                           [MACROS_VERSION]).fetchall()
        assert rows == [(persistent_digest(),)]
        # An older rms_duck's macros: register() re-creates them and records the new digest.
        con.execute("UPDATE rms_schema_version SET sql_sha256 = 'old' WHERE version = ?",
                    [MACROS_VERSION])
        con.execute("CREATE OR REPLACE MACRO rms_verify_receipts() AS TABLE SELECT 'old' AS x")
        rms_duck.register(con)
        assert con.execute("SELECT sql_sha256 FROM rms_schema_version WHERE version = ?",
                           [MACROS_VERSION]).fetchall() == [(persistent_digest(),)]
        assert con.execute("SELECT * FROM rms_verify_receipts()").fetchall() == []
    finally:
        con.close()


@pytest.mark.slow
def test_read_only_file_with_old_macros_gets_current_temp_copies(db):
    path, _ = db
    con = duckdb.connect(path)
    con.execute("UPDATE rms_schema_version SET sql_sha256 = 'old' WHERE version = ?",
                [MACROS_VERSION])
    con.execute("CREATE OR REPLACE MACRO rms_verify_receipts() AS TABLE SELECT 'old' AS x")
    con.close()
    ro = rms_duck.connect(path, read_only=True)
    try:
        assert ro.execute("SELECT * FROM rms_verify_receipts()").fetchall() == []
        assert [r[0] for r in ro.execute("SELECT identical FROM rms_replay()").fetchall()] == [True]
    finally:
        ro.close()


@pytest.mark.slow
def test_rms_duck_never_runs_a_macro_body_stored_in_the_file(db):
    """A file whose stored rms_candidates reads a file, with a forged 'current' digest row:
    rms_duck's connections and cursors run the shipped SQL, which shadows it."""
    path, _ = db
    plain = duckdb.connect(path)
    plain.execute("CREATE OR REPLACE MACRO rms_candidates(query, namespace := NULL, k := 50, "
                  "query_embedding := NULL, weights := NULL, ngram_min := 0.2, "
                  "stale_ok := false) AS TABLE SELECT 'forged' AS id, 1.0 AS score, "
                  "'stolen' AS content")
    plain.execute("CREATE OR REPLACE MACRO rms_verify_receipts() AS TABLE SELECT 1 AS x "
                  "WHERE false")
    plain.execute("UPDATE rms_bundles SET context = context || 'x'")  # a real problem
    plain.close()
    con = rms_duck.connect(path)
    try:
        assert con.execute("SELECT sql_sha256 FROM rms_schema_version WHERE version = ?",
                           [MACROS_VERSION]).fetchall() == [(persistent_digest(),)]
        bundle = rms_duck.pack(con, "SELECT * FROM rms_candidates('Heron cut-over', 'team')",
                               budget=400, store=False)
        assert "forged" not in bundle.included_ids and "stolen" not in bundle.context
        problems = {r[0] for r in con.execute("SELECT problem FROM rms_verify_receipts()"
                                              ).fetchall()}
        assert "CONTEXT_MISMATCH" in problems
    finally:
        con.close()


@pytest.mark.slow
def test_a_plain_client_stems_only_words_the_index_has_seen(db):
    """docs/integrations.md: plain DuckDB stems query words through rms_lexical_stems, so a
    form the index never saw stays as it is and ranks otherwise than on rms_duck's side."""
    path, _ = db
    terms = "SELECT list(term ORDER BY term) FROM rms_query_terms('moving lasagnes')"
    con = rms_duck.connect(path)
    try:
        assert con.execute(terms).fetchall() == [(["lasagn", "move"],)]
        assert con.execute("SELECT count(*) FROM rms_candidates('lasagnes')").fetchall() == [
            (1,)]
    finally:
        con.close()
    plain = duckdb.connect(path)
    try:
        assert plain.execute(terms).fetchall() == [(["lasagnes", "moving"],)]
        assert plain.execute("SELECT count(*) FROM rms_bm25('lasagnes')").fetchall() == [(0,)]
    finally:
        plain.close()

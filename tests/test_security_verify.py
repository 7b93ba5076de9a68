"""Adversarial review H1, M3, M4, M7: verification runs shipped SQL on the raw tables, binds
every bundle column, fails on any replay difference, and audits read-only."""

from __future__ import annotations

import json
import re
import warnings

import duckdb
import pyarrow as pa
import pytest

import rms_duck
from rms_duck.audit.explain import explain
from rms_duck.audit.summary import summarise
from rms_duck.cli import main
from rms_duck.errors import ReceiptError, RmsWarning, StoredObjectError
from rms_duck.escape import canonical_json
from rms_duck.receipts import RECEIPT_VERSION, sha256_text

EMPTY_PROBLEMS = (
    "CREATE OR REPLACE VIEW rms_receipt_problems AS SELECT NULL::VARCHAR AS chain_namespace, "
    "NULL::BIGINT AS seq, NULL::UUID AS receipt_id, NULL::UUID AS bundle_id, "
    "NULL::VARCHAR AS problem, NULL::VARCHAR AS detail WHERE false")


def table(k: int, n: int = 30):
    return pa.Table.from_pylist([{"id": f"r{k}-{j}", "score": 0.5,
                                  "content": f"record {j} " * (5 + j)} for j in range(n)])


@pytest.fixture
def h1_db(tmp_path):
    """The H1 attack: a mid-chain receipt edited without re-hashing, and the problems view
    replaced by one that never returns a row. Returns the path."""
    path = str(tmp_path / "h1.duckdb")
    con = rms_duck.connect(path)
    for k in range(3):
        rms_duck.pack(con, table(k), budget=300, namespace="ns")
    con.close()
    attacker = duckdb.connect(path)
    rid, text = attacker.execute(
        "SELECT receipt_id, receipt FROM rms_receipts WHERE seq = 2").fetchone()
    attacker.execute("UPDATE rms_receipts SET receipt = ? WHERE receipt_id = ?",
                     [text.replace('"BUDGET_EXHAUSTED"', '"DUPLICATE"'), rid])
    attacker.execute(EMPTY_PROBLEMS)
    attacker.close()
    return path


def codes(problems):
    return {p.problem for p in problems}


def test_a_replaced_problems_view_cannot_hide_an_edited_receipt(h1_db):
    con = duckdb.connect(h1_db, read_only=True)
    try:
        problems = rms_duck.verify_receipts(con)
    finally:
        con.close()
    assert {"DIGEST_MISMATCH", "CHAIN_BROKEN", "STORED_OBJECT_CHANGED"} <= codes(problems)
    [changed] = [p for p in problems if p.problem == "STORED_OBJECT_CHANGED"]
    assert changed.object_name == "rms_receipt_problems"
    assert "differs from the shipped view" in changed.detail


@pytest.mark.slow
def test_register_restores_the_shipped_view_and_warns(h1_db):
    with pytest.warns(RmsWarning, match="restored the shipped definitions of rms_receipt_problems"):
        con = rms_duck.connect(h1_db)
    try:
        assert {"DIGEST_MISMATCH", "CHAIN_BROKEN"} <= codes(rms_duck.verify_receipts(con))
        assert "STORED_OBJECT_CHANGED" not in codes(rms_duck.verify_receipts(con))
    finally:
        con.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error", RmsWarning)
        rms_duck.connect(h1_db).close()  # nothing left to restore


def test_audit_replay_fails_on_the_h1_database(h1_db, capsys):
    assert main(["audit", "--db", h1_db, "--replay"]) == 1
    out = capsys.readouterr().out
    assert "DIGEST_MISMATCH" in out and "STORED_OBJECT_CHANGED" in out


def test_a_macro_shadowing_a_builtin_is_reported(tmp_path):
    path = str(tmp_path / "shadow.duckdb")
    rms_duck.connect(path).close()
    attacker = duckdb.connect(path)
    attacker.execute("CREATE MACRO sha256(x) AS 'forged'")
    attacker.execute("CREATE MACRO rms_evil(p) AS TABLE SELECT content FROM read_text(p)")
    attacker.close()
    con = duckdb.connect(path, read_only=True)
    problems = rms_duck.verify_receipts(con)
    con.close()
    by_code = {p.problem: p.object_name for p in problems}
    assert by_code == {"STORED_OBJECT_SHADOWS": "sha256", "STORED_OBJECT_UNKNOWN": "rms_evil"}


def test_explain_ignores_a_replaced_decisions_view(con):
    rid = rms_duck.pack(con, table(0), budget=200).receipt_id
    con.execute("CREATE TABLE saved AS SELECT * FROM rms_receipt_decisions")
    con.execute("CREATE OR REPLACE VIEW rms_receipt_decisions AS SELECT * REPLACE "
                "('included' AS decision) FROM saved")
    assert con.execute("SELECT DISTINCT decision FROM rms_receipt_decisions").fetchall() == [
        ("included",)]
    rows = explain(con, rid)
    assert {r["decision"] for r in rows} == {"included", "excluded"}
    assert "STORED_OBJECT_CHANGED" in codes(rms_duck.verify_receipts(con))


@pytest.mark.parametrize("column, value", [
    ("session_id", "'other'"), ("namespace_id", "'zzz'"), ("query_text", "'SELECT forged'"),
    ("included_count", "99"), ("excluded_count", "7"),
    ("created_at", "created_at - INTERVAL 300 DAY"),
])
def test_every_bundle_column_is_bound_to_the_receipt(con, column, value):
    for k in range(2):
        rms_duck.pack(con, pa.Table.from_pylist(
            [{"id": f"{k}-{j}", "score": 0.5, "content": f"note {j}"} for j in range(5)]),
            budget=300, session_id="s1")
    assert rms_duck.verify_receipts(con) == []
    con.execute(f"UPDATE rms_bundles SET {column} = {value}")
    problems = rms_duck.verify_receipts(con)
    assert {(p.problem, f"bundle column {column} " in p.detail) for p in problems} == {
        ("BUNDLE_FIELD_MISMATCH", True)}


def test_a_case_only_edit_is_reported_whatever_collation_the_caller_set(tmp_path):
    path = str(tmp_path / "c.duckdb")
    con = rms_duck.connect(path)
    rms_duck.pack(con, pa.Table.from_pylist([{"id": "a", "score": 0.5, "content": "x"}]),
                  budget=300, session_id="s1")
    con.execute("UPDATE rms_bundles SET session_id = 'S1'")
    con.execute("UPDATE rms_receipts SET receipt_sha256 = upper(receipt_sha256)")
    con.execute("SET GLOBAL default_collation = 'nocase'")
    assert codes(rms_duck.verify_receipts(con)) == {"BUNDLE_FIELD_MISMATCH", "DIGEST_MISMATCH"}
    con.close()


def test_every_bundle_column_is_checked_by_verify(con):
    """A new rms_bundles column must be bound, or derived and checked, before it ships."""
    columns = {c for (c,) in con.execute(
        "SELECT column_name FROM duckdb_columns() WHERE table_name = 'rms_bundles'").fetchall()}
    from rms_duck.duck.shipped import view_query
    sql = view_query("rms_receipt_problems")
    digested = {"bundle_id", "context", "context_sha256", "inputs"}  # joined or hashed
    assert {c for c in columns - digested if f"'{c}'" not in sql} == set()


@pytest.mark.slow
@pytest.mark.parametrize("edit", ["reasons", "encoding", "fields"])
def test_audit_replay_fails_on_any_replay_difference(tmp_path, capsys, edit):
    path = str(tmp_path / "m4.duckdb")
    con = rms_duck.connect(path)
    rid = rms_duck.pack(con, pa.Table.from_pylist(
        [{"id": f"{j}", "score": 0.5, "content": f"note {j} " * 30} for j in range(30)]),
        budget=200).receipt_id
    body = json.loads(con.execute("SELECT receipt FROM rms_receipts WHERE receipt_id = ?",
                                  [rid]).fetchone()[0])
    if edit == "reasons":
        for c in body["candidates"]:
            if c["decision"] == "excluded":
                c["reason"] = "DUPLICATE"
    elif edit == "encoding":
        body["encoding"]["sha256"] = "0" * 64
    else:  # audit review F4: re-sealed with false flags, count, metrics and conflicts
        body.update(flags=["BUDGET_OVERFLOW"], tokens_used=10, conflicts=[["0", "1"]])
        body["metrics"]["budget_efficiency"] = 0.99
    text = canonical_json(body)
    con.execute("UPDATE rms_receipts SET receipt = ?, receipt_sha256 = ? WHERE receipt_id = ?",
                [text, sha256_text(text), rid])
    con.execute("UPDATE rms_chain_heads SET receipt_sha256 = ?", [sha256_text(text)])
    result = rms_duck.replay(con, rid)
    assert result.identical and not result.reproduced
    # SQL's rms_replay() says the same (it had only `identical`, audit review F7).
    assert con.execute("SELECT identical, same_decisions, encoding_changed, differing_fields, "
                       "reproduced FROM rms_replay()").fetchall() == [
        (True, result.same_decisions, result.encoding_changed,
         list(result.differing_fields), False)]
    assert (not result.same_decisions or result.encoding_changed
            or result.differing_fields == ("conflicts", "flags", "metrics", "tokens_used"))
    assert not summarise(con, with_replay=True).ok
    con.close()
    assert main(["audit", "--db", path, "--replay"]) == 1
    out = capsys.readouterr().out
    assert "DIFFERS" in out
    if edit == "fields":
        assert "receipt fields differ: conflicts, flags, metrics, tokens_used" in out


def test_replay_compares_the_stored_context_too(tmp_path):
    """Audit review F7: replay compared only the receipt's digest, so with the bundle's
    context edited it still said identical ("reproduce their bytes")."""
    path = str(tmp_path / "ctx.duckdb")
    con = rms_duck.connect(path)
    rid = rms_duck.pack(con, table(0), budget=300).receipt_id
    assert rms_duck.replay(con, rid).reproduced
    con.execute("UPDATE rms_bundles SET context = context || '!'")
    result = rms_duck.replay(con, rid)
    assert result.replayed_sha256 == result.recorded_sha256 and not result.identical
    assert con.execute("SELECT identical, reproduced FROM rms_replay()").fetchall() == [
        (False, False)]


def test_sql_replay_is_not_reproduced_when_the_inputs_were_edited(tmp_path):
    """Last review F7: rms_replay() said reproduced with inputs that no longer hash to the
    receipt's inputs_sha256 (Python's replay refuses them)."""
    con = rms_duck.connect(str(tmp_path / "inputs.duckdb"))
    rms_duck.pack(con, table(0), budget=300)
    con.execute("UPDATE rms_bundles SET inputs = replace(CAST(inputs AS VARCHAR), '{\"', "
                "'{ \"')")
    assert con.execute("SELECT inputs_intact, reproduced FROM rms_replay()").fetchall() == [
        (False, False)]
    con.close()
    con.close()


@pytest.mark.parametrize("old, new, message", [
    ('"candidates":[', '"candidates":[1,', "field 'candidates' must be a list of decision"),
    ('"content_sha256":', '"content_sha":', "field 'candidates' must be a list of decision"),
    ('"encoding":{', '"encoding":"o200k_base","x":{', "field 'encoding' must be an object"),
    ('"budget":300', '"budget":300.4', "'budget' must be a whole number, got 300.4"),
    ('"budget":300', '"budget":true', "'budget' must be a whole number, got True"),
    (f'"receipt_version":{RECEIPT_VERSION}', '"receipt_version":"3"',
     "'receipt_version' must be a whole"),
    (f'"receipt_version":{RECEIPT_VERSION}', '"receipt_version":[3]',
     "'receipt_version' must be a whole"),
])
@pytest.mark.slow
def test_replay_of_an_edited_receipt_is_a_receipt_error_in_python_and_sql(
        tmp_path, capsys, old, new, message):
    path = str(tmp_path / "f4.duckdb")
    con = rms_duck.connect(path)
    rid = rms_duck.pack(con, pa.Table.from_pylist(
        [{"id": f"n{i}", "score": 0.5, "content": f"record {i}"} for i in range(4)]),
        budget=300).receipt_id
    con.execute("UPDATE rms_receipts SET receipt = replace(receipt, ?, ?)", [old, new])
    [(edited,)] = con.execute("SELECT receipt FROM rms_receipts").fetchall()
    assert new in edited  # the edit took: a receipt format change must update `old`
    with pytest.raises(ReceiptError, match=message):
        rms_duck.replay(con, rid)
    if old.startswith('"b') or old.startswith('"r'):  # SQL replay must not coerce them
        (identical, error), = con.execute("SELECT identical, error FROM rms_replay()").fetchall()
        assert not identical and message in error
    con.close()
    assert main(["audit", "--db", path, "--replay"]) == 1
    assert "Traceback" not in capsys.readouterr().err


def _tables(path):
    con = duckdb.connect(path, read_only=True)
    try:
        rows = con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
        return sorted(r[0] for r in rows)
    finally:
        con.close()


def test_audit_never_writes_into_a_file_that_is_not_an_rms_database(tmp_path, capsys):
    path = str(tmp_path / "m7.duckdb")
    duckdb.connect(path).execute("CREATE TABLE t(x INT)").close()
    assert main(["audit", "--db", path]) == 1
    assert "STORED_OBJECT_MISSING at object rms_receipts" in capsys.readouterr().out
    assert _tables(path) == ["t"]


@pytest.mark.slow
def test_audit_reports_dropped_tables_instead_of_recreating_them(tmp_path, capsys):
    path = str(tmp_path / "dropped.duckdb")
    con = rms_duck.connect(path)
    rms_duck.pack(con, table(0), budget=300)
    con.close()
    attacker = duckdb.connect(path)
    for name in ("rms_receipts", "rms_bundles"):
        attacker.execute(f"DROP TABLE {name}")
    attacker.execute("DROP VIEW rms_session_metrics")
    attacker.close()
    before = _tables(path)
    assert main(["audit", "--db", path, "--replay"]) == 1
    out = capsys.readouterr().out
    for name in ("rms_receipts", "rms_bundles", "rms_session_metrics"):
        assert f"STORED_OBJECT_MISSING at object {name}" in out
    assert "verify      OK" not in out
    assert _tables(path) == before


@pytest.mark.slow
def test_a_read_only_connection_warns_about_changed_objects(h1_db):
    with pytest.warns(RmsWarning, match="stored objects differ from the shipped ones: "
                                         "rms_receipt_problems"):
        con = rms_duck.connect(h1_db, read_only=True)
    try:
        assert "STORED_OBJECT_CHANGED" in codes(rms_duck.verify_receipts(con))
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.parametrize("spelling", ["SHA256", "Sha256"])
def test_a_macro_shadowing_a_builtin_in_another_case_is_reported(tmp_path, spelling):
    """Audit review F1: DuckDB resolves SHA256 as sha256, so a macro spelt in upper case
    replaced every digest check and verify (heads included) passed over edited contexts."""
    path = str(tmp_path / "shadow.duckdb")
    con = rms_duck.connect(path)
    rms_duck.pack(con, table(0), budget=300, namespace="ns")
    heads = rms_duck.export_heads(con)
    con.close()
    attacker = duckdb.connect(path)
    attacker.execute("CREATE TABLE cache AS SELECT context || '!' AS t, sha256(context) AS h "
                     "FROM rms_bundles")
    attacker.execute("UPDATE rms_bundles SET context = context || '!'")
    attacker.execute(f"CREATE MACRO {spelling}(x) AS coalesce((SELECT h FROM cache WHERE t = x), "
                     "system.main.sha256(x))")
    attacker.close()
    con = duckdb.connect(path, read_only=True)
    problems = rms_duck.verify_receipts(con, heads=heads)
    con.close()
    assert [(p.problem, p.object_name) for p in problems] == [
        ("STORED_OBJECT_SHADOWS", spelling)]


@pytest.mark.slow
def test_objects_in_another_case_are_compared_and_restored(tmp_path):
    """Audit review F2/F3: RMS_RECEIPT_PROBLEMS replaced the shipped view unseen (no warning,
    no restore, verify called it dropped), and an RMS_* table macro was never reported."""
    path = str(tmp_path / "case.duckdb")
    con = rms_duck.connect(path)
    rms_duck.pack(con, table(0), budget=300, namespace="ns")
    con.close()
    attacker = duckdb.connect(path)
    attacker.execute("UPDATE rms_bundles SET context = context || '!'")
    attacker.execute(EMPTY_PROBLEMS.replace("rms_receipt_problems", "RMS_RECEIPT_PROBLEMS"))
    attacker.execute("CREATE MACRO RMS_notes() AS TABLE SELECT 'x' AS id")
    attacker.close()
    audit = duckdb.connect(path, read_only=True)
    found = {(p.problem, p.object_name) for p in rms_duck.verify_receipts(audit)}
    audit.close()
    assert {("STORED_OBJECT_CHANGED", "rms_receipt_problems"),
            ("STORED_OBJECT_UNKNOWN", "rms_notes")} <= {(c, n) for c, n in found}
    assert "STORED_OBJECT_MISSING" not in {c for c, _ in found}
    with pytest.warns(RmsWarning, match="rms_receipt_problems, rms_notes"):
        rms_duck.connect(path, read_only=True).close()
    with pytest.warns(RmsWarning, match="restored the shipped definitions of "
                                        "rms_receipt_problems"):
        con = rms_duck.connect(path)
    try:
        assert con.execute("SELECT problem FROM rms_verify_receipts()").fetchall() == [
            ("CONTEXT_MISMATCH",)]
    finally:
        con.close()


def attacked(path: str, *statements: str) -> str:
    """A new rms_duck database at `path`, then `statements` run on it by plain DuckDB."""
    rms_duck.connect(path).close()
    attacker = duckdb.connect(path)
    for statement in statements:
        attacker.execute(statement)
    attacker.close()
    return path


def test_a_stored_macro_named_like_a_udf_in_another_case_is_dropped(tmp_path):
    path = attacked(str(tmp_path / "udf.duckdb"), "CREATE MACRO RMS_PACK_UDF(a, b, c) AS NULL")
    with pytest.warns(RmsWarning, match="dropped stored macros named like rms_duck's own "
                                        r"functions \(RMS_PACK_UDF\)"):
        con = rms_duck.connect(path)
    try:
        assert con.execute("SELECT (pack_context([{'id': 'a', 'score': 0.5, 'content': 'x'}], "
                           "300)).tokens_used").fetchall()[0][0] > 0
    finally:
        con.close()


@pytest.mark.slow
def test_a_stored_macro_named_like_a_udf_is_reported_and_dropped(tmp_path):
    from rms_duck.errors import StoredObjectError

    path = attacked(str(tmp_path / "udf.duckdb"), "CREATE MACRO rms_pack_udf(a, b, c) AS NULL")
    audit = duckdb.connect(path, read_only=True)
    assert "STORED_OBJECT_UNKNOWN" in codes(rms_duck.verify_receipts(audit))
    audit.close()
    with pytest.raises(StoredObjectError, match=r"rms_pack_udf.*rms_duck.connect\(path\)"):
        with pytest.warns(RmsWarning):
            rms_duck.connect(path, read_only=True)
    with pytest.warns(RmsWarning, match=r"dropped stored macros .*\(rms_pack_udf\)"):
        con = rms_duck.connect(path)
    try:
        assert rms_duck.verify_receipts(con) == []
        assert con.execute("SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'x'}], "
                           "300).tokens_used").fetchone()[0] > 0
    finally:
        con.close()


@pytest.mark.slow
@pytest.mark.parametrize("table_name, key, edit", [
    ("rms_bundles", "PRIMARY KEY (bundle_id)", ("UUID PRIMARY KEY", "UUID NOT NULL")),
    ("rms_receipts", "UNIQUE (bundle_id)", ("NOT NULL UNIQUE", "NOT NULL"))])
def test_a_table_rebuilt_without_its_key_is_reported(tmp_path, capsys, table_name, key, edit):
    """Review finding: rms_bundles rebuilt from the shipped DDL with `PRIMARY KEY` turned into
    `NOT NULL` compares equal column by column, and then holds a second copy of a bundle row
    that both verifiers passed. The key is part of the table's fingerprint now."""
    from rms_duck.duck.shipped import shipped_statements

    path = str(tmp_path / "keys.duckdb")
    con = rms_duck.connect(path)
    rms_duck.pack(con, table(0), budget=300, namespace="ns")
    con.close()
    ddl = shipped_statements()[table_name][1]
    assert ddl.count(edit[0]) == 1
    con = duckdb.connect(path)
    con.execute(f"CREATE TABLE keep AS SELECT * FROM {table_name}")
    con.execute(f"DROP TABLE {table_name}")
    con.execute(ddl.replace(*edit))
    con.execute(f"INSERT INTO {table_name} SELECT * FROM keep")
    if table_name == "rms_bundles":  # the copy the key would have refused
        con.execute(f"INSERT INTO {table_name} SELECT * FROM keep")
    con.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RmsWarning)
        con = rms_duck.connect(path, read_only=True)
    problems = rms_duck.verify_receipts(con)
    con.close()
    assert [(p.problem, p.object_name) for p in problems] == [
        ("STORED_OBJECT_CHANGED", table_name)]
    assert f"it lacks '{key}'" in problems[0].detail
    assert main(["audit", "--db", path]) == 1
    assert key in capsys.readouterr().out


def test_a_view_planted_before_the_schema_existed_is_still_restored(tmp_path):
    """connect() skips comparing stored objects with the shipped ones only for a database
    that held no rms_* table or view: one planted view is enough to compare and restore."""
    path = str(tmp_path / "planted.duckdb")
    plain = duckdb.connect(path)
    plain.execute(EMPTY_PROBLEMS)
    plain.close()
    with pytest.warns(RmsWarning, match="restored the shipped definitions of "
                                        "rms_receipt_problems"):
        con = rms_duck.connect(path)
    assert rms_duck.verify_receipts(con) == []
    con.close()


@pytest.mark.slow
@pytest.mark.parametrize("connector", ["rms_duck", "duckdb"])
def test_audits_refuse_an_empty_default_database_beside_an_attached_store(tmp_path,
                                                                          connector):
    """Audit review F5: after ATTACH ... ; USE, verify ran on a cursor, which reads the
    default database: an empty one, so verify returned [] over an edited context. Following
    USE meant asking the caller's connection (diff reviews: that ended its open results,
    failed inside rms_store and raced threads); the audits now refuse the ambiguity."""
    path = str(tmp_path / "attached.duckdb")
    con = rms_duck.connect(path)
    rid = rms_duck.pack(con, table(0), budget=300, namespace="ns").receipt_id
    con.close()
    editor = duckdb.connect(path)
    editor.execute("UPDATE rms_bundles SET context = context || '!'")
    editor.close()
    auditor = rms_duck.connect() if connector == "rms_duck" else duckdb.connect()
    auditor.execute(f"ATTACH '{path}' AS audited (READ_ONLY)")
    auditor.execute("USE audited")
    try:
        message = (r"rms_duck's audits read this connection's default database 'memory', "
                   r"which holds no receipts, while attached databases or other schemas hold "
                   r"some: 'audited' \(1\); an audit reads the receipts in schema main of the "
                   r"database the connection was opened on, whatever ATTACH or USE did "
                   r"since\. To audit an attached file, DETACH it")
        for audit in (rms_duck.verify_receipts, rms_duck.export_heads,
                      lambda c: rms_duck.replay(c, rid), summarise):
            with pytest.raises(ReceiptError, match=message):
                audit(auditor)
    finally:
        auditor.close()
    direct = duckdb.connect(path, read_only=True)  # what the message says to do, detached
    try:
        assert [p.problem for p in rms_duck.verify_receipts(direct)] == ["CONTEXT_MISMATCH"]
    finally:
        direct.close()


@pytest.mark.slow
def test_packs_and_audits_use_the_database_connected_to_beside_attached_ones(tmp_path):
    """Diff review: rms_store() failed whenever another database was attached (the cursor
    asked the connection running the query), and a pack's store and its audits must agree
    on one database."""
    store = str(tmp_path / "store.duckdb")
    con = rms_duck.connect(store)
    rms_duck.pack(con, table(0), budget=300)
    con.close()
    con = rms_duck.connect(str(tmp_path / "home.duckdb"))
    try:
        con.execute(f"ATTACH '{store}' AS other")
        con.execute("USE other")
        rid = rms_duck.pack(con, table(1), budget=300).receipt_id
        (stored,), = con.execute(
            "SELECT rms_store(list(c), 300) FROM (SELECT 'a' AS id, 0.5 AS score, "
            "'hello' AS content) AS c").fetchall()
        assert con.execute("SELECT count(*) FROM home.rms_receipts").fetchall() == [(2,)]
        assert con.execute("SELECT count(*) FROM other.rms_receipts").fetchall() == [(1,)]
        assert rms_duck.replay(con, rid).reproduced and rms_duck.replay(con, stored).reproduced
        assert rms_duck.verify_receipts(con) == []
        pending = con.execute("SELECT * FROM range(1000)")
        assert len(pending.fetchmany(10)) == 10
        rms_duck.pack(con, table(2), budget=300)
        rms_duck.verify_receipts(con)
        assert len(pending.fetchmany(10)) == 10  # the caller's open result is untouched
    finally:
        con.close()


def test_register_after_use_of_another_database_is_refused(tmp_path):
    """Last review F1: register() after ATTACH ...; USE installed the schema in the chosen
    database, while packs store in the one connected to: a raw CatalogException."""
    from rms_duck.errors import StoredObjectError

    con = duckdb.connect()
    try:
        con.execute(f"ATTACH '{tmp_path / 'f.duckdb'}' AS f")
        con.execute("USE f")
        with pytest.raises(StoredObjectError, match=r"rms_duck.register\(con\) after USE "
                           r"'f': rms_duck stores bundles in, and audits, the database the "
                           r"connection was opened on \('memory'\).*register before USE"):
            rms_duck.register(con)
        assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name LIKE "
                           "'rms_%'").fetchall() == [(0,)]  # nothing half-installed
        con.execute("USE memory")
        rms_duck.register(con)
        assert rms_duck.pack(con, table(0), budget=300).receipt_id is not None
    finally:
        con.close()


@pytest.mark.slow
def test_threads_sharing_a_connection_pack_beside_an_attached_database(tmp_path):
    """Diff review: with another database attached, threads sharing one connection failed
    with ResourceInUseException (each cursor asked the connection)."""
    from concurrent.futures import ThreadPoolExecutor

    con = rms_duck.connect(str(tmp_path / "threads.duckdb"))
    try:
        con.execute("ATTACH ':memory:' AS scratch")
        with ThreadPoolExecutor(4) as pool:
            ids = list(pool.map(lambda k: rms_duck.pack(con, table(k, n=3), budget=200)
                                .receipt_id, range(40)))
        assert len(set(ids)) == 40 and rms_duck.verify_receipts(con) == []
    finally:
        con.close()


@pytest.mark.slow
def test_an_audit_leaves_the_callers_open_result_alone(tmp_path):
    """Diff review: asking `con` which database it uses ended the result a caller was
    reading on it, so a loop replaying each receipt stopped after the first."""
    con = rms_duck.connect(str(tmp_path / "loop.duckdb"))
    try:
        for k in range(5):
            rms_duck.pack(con, table(k, n=3), budget=300)
        pending = con.execute("SELECT CAST(receipt_id AS VARCHAR) FROM rms_receipts "
                              "ORDER BY seq")
        replayed = 0
        while (row := pending.fetchone()) is not None:
            assert rms_duck.replay(con, row[0]).reproduced
            assert rms_duck.verify_receipts(con) == []
            replayed += 1
        assert replayed == 5
    finally:
        con.close()


def test_a_named_in_memory_database_is_shared_so_a_second_connect_still_registers():
    # connect() skips looking for registered UDFs only in a private ":memory:" database;
    # a named one is shared by the process, and creating its UDFs twice would fail.
    first = rms_duck.connect(":memory:rms_shared_test")
    second = rms_duck.connect(":memory:rms_shared_test")
    try:
        query = ("SELECT (pack_context([{'id': 'a', 'score': 0.5, 'content': 'shared'}], 400))"
                 ".tokens_used")
        assert first.execute(query).fetchone() == second.execute(query).fetchone()
        assert second.execute(query).fetchone()[0] > 0
    finally:
        second.close()
        first.close()


@pytest.mark.parametrize("where, place", [
    ("ATTACH ':memory:' AS other; CREATE SCHEMA other.archive; "
     "CREATE TABLE other.archive.rms_receipts AS SELECT 1 AS seq", "'other.archive' (1)"),
    ("CREATE SCHEMA archive; CREATE TABLE archive.rms_receipts AS SELECT 1 AS seq "
     "UNION ALL SELECT 2", "'memory.archive' (2)"),
])
def test_audits_refuse_receipts_kept_outside_schema_main(where, place):
    """Known since the audit review: only schema main was counted, so receipts kept in
    another schema, of the default database or an attached one, left an audit of the empty
    default store passing with nothing to say."""
    con = rms_duck.connect()
    try:
        con.execute(where)
        for audit in (rms_duck.verify_receipts, rms_duck.export_heads, summarise):
            with pytest.raises(ReceiptError, match=re.escape(
                    f"while attached databases or other schemas hold some: {place}")):
                audit(con)
    finally:
        con.close()


def _narrowed_candidate_type(path: str) -> None:
    """rms_candidate re-created by plain DuckDB with `contradicts` renamed (so a STRUCT cast
    drops it) and `confidence` narrowed to one decimal."""
    attacker = duckdb.connect(path)
    try:
        (shipped,), = attacker.execute("SELECT typeof(CAST(NULL AS rms_candidate))").fetchall()
        edited = (shipped.replace("contradicts VARCHAR[]", "contradicts_ VARCHAR[]")
                  .replace("confidence DOUBLE", "confidence DECIMAL(2,1)"))
        assert edited != shipped
        attacker.execute(f"CREATE OR REPLACE TYPE rms_candidate AS {edited}")
    finally:
        attacker.close()


PACK_A_CONFLICT = (
    "SELECT pack_context([{'id': 'a', 'score': 0.5, 'content': 'one', 'confidence': 0.77}, "
    "{'id': 'b', 'score': 0.4, 'content': 'two', 'contradicts': ['a']}], 300, "
    "{'context_format': 'auditable'})")


def test_an_edited_candidate_type_is_restored_before_it_can_change_a_pack(tmp_path):
    path = str(tmp_path / "type.duckdb")
    con = rms_duck.connect(path)
    [(expected,)] = con.execute(PACK_A_CONFLICT).fetchall()
    con.close()
    assert expected["conflicts"] == [["a", "b"]]
    _narrowed_candidate_type(path)
    with pytest.warns(RmsWarning, match="restored the shipped definitions of rms_candidate"):
        con = rms_duck.connect(path)
    try:
        [(bundle,)] = con.execute(PACK_A_CONFLICT).fetchall()
        assert bundle["conflicts"] == [["a", "b"]]
        assert bundle["context"] == expected["context"]
        assert rms_duck.verify_receipts(con) == []
    finally:
        con.close()


def test_an_edited_candidate_type_a_table_holds_is_an_error_not_a_changed_pack(tmp_path):
    path = str(tmp_path / "type-held.duckdb")
    rms_duck.connect(path).close()
    _narrowed_candidate_type(path)
    attacker = duckdb.connect(path)
    attacker.execute("CREATE TABLE pinned_type (c rms_candidate)")
    attacker.close()
    with pytest.raises(StoredObjectError, match="stored type rms_candidate differs"):
        rms_duck.connect(path)


def test_text_from_the_file_cannot_forge_or_erase_lines_of_the_audit_report(tmp_path, capsys):
    """A writer's session id, namespace or flag was printed raw: ESC sequences erased the
    `verify FAILED` lines and a line break printed a `verify OK` line of its own."""
    path = str(tmp_path / "ansi.duckdb")
    forged = ("verify      OK: 1 receipt(s) in 1 chain(s); digests, links and bundle "
              "bindings all check out")
    con = rms_duck.connect(path)
    rms_duck.pack(con, table(0, 3), budget=300, namespace="ns\x1b[8m",
                  session_id="s\x1b[2K\r\x1b[1A\x1b[2K\n" + forged)
    con.close()
    attacker = duckdb.connect(path)
    attacker.execute("UPDATE rms_bundles SET budget = budget + 1, "
                     "flags = ['\x1b[1A\x1b[2K\u202e', '\u2028' || ?]", [forged])
    attacker.close()
    assert main(["audit", "--db", path]) == 1
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\r" not in out and "\u202e" not in out
    assert "\u2028" not in out
    lines = out.splitlines()
    assert not any(line.startswith("verify      OK") for line in lines)
    assert any(line.startswith("verify      FAILED") for line in lines)
    assert "s\\x1b[2K\\x0d\\x1b[1A\\x1b[2K\\x0a" + forged in out

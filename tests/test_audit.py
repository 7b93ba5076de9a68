"""Audits: explain, replay (Python and SQL), STR metrics per bundle and session, query shapes,
and the `rms-duck audit` command."""

from __future__ import annotations

import io
import json
import re
import shutil
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

import rms_duck
from rms_duck.audit.explain import explain
from rms_duck.cli import main
from rms_duck.cli.demo import run_demo
from rms_duck.errors import ReceiptError
from rms_duck.escape import canonical_json
from rms_duck.metrics import _quantile, str_value
from rms_duck.packing.repack import repack

NODE_QUERY = ("SELECT CAST(id AS VARCHAR) AS id, salience AS score, content FROM rms_nodes "
              "ORDER BY id")


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory):
    """The demo packed twice as shipped, then once at a tight budget: (path, bundles)."""
    path = str(tmp_path_factory.mktemp("demo") / "demo.duckdb")
    bundles = [run_demo(path, out=io.StringIO()), run_demo(path, out=io.StringIO()),
               run_demo(path, budget=1200, context_format="auditable", out=io.StringIO())]
    return path, bundles


@pytest.fixture
def demo(demo_db):
    con = rms_duck.connect(demo_db[0])
    yield con
    con.close()


def add_nodes(con, contents: list[str]) -> list[str]:
    ids = [str(uuid.UUID(int=i + 1)) for i in range(len(contents))]
    con.executemany("INSERT INTO rms_nodes (id, content, salience) VALUES (?, ?, 0.5)",
                    [[i, c] for i, c in zip(ids, contents, strict=False)])
    return ids


# -- replay ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_replay_reproduces_the_bytes_of_every_demo_receipt(demo):
    ids = [r[0] for r in demo.execute(
        "SELECT CAST(receipt_id AS VARCHAR) FROM rms_receipts ORDER BY seq").fetchall()]
    assert len(ids) == 3
    for rid in ids:
        result = rms_duck.replay(demo, rid)
        assert result.identical and result.same_decisions, rid
        assert result.changed_nodes == () and result.missing_nodes == ()
        assert not result.encoding_changed
    assert demo.execute(
        "SELECT count(*), bool_and(identical), bool_and(inputs_intact), "
        "bool_and(error IS NULL), bool_and(len(changed_nodes) = 0) FROM rms_replay()"
    ).fetchall() == [(3, True, True, True, True)]


def test_replay_names_nodes_changed_or_deleted_since(con):
    ids = add_nodes(con, ["alpha note", "beta note", "gamma note"])
    rid = rms_duck.pack(con, NODE_QUERY, budget=400).receipt_id
    con.execute("UPDATE rms_nodes SET content = 'alpha, edited' WHERE id = ?", [ids[0]])
    con.execute("DELETE FROM rms_nodes WHERE id = ?", [ids[2]])
    result = rms_duck.replay(con, rid)
    assert result.identical  # the recorded inputs still give the recorded bytes
    assert result.changed_nodes == (ids[0],)
    assert result.missing_nodes == (ids[2],)
    assert con.execute("SELECT identical, changed_nodes FROM rms_replay(?)", [rid]).fetchall() \
        == [(True, [ids[0]])]


def test_replay_accepts_a_bundle_id_and_uuid_objects(con):
    bundle = rms_duck.pack(con, pa.Table.from_pylist([{"id": "a", "score": 0.4, "content": "x"}]),
                           budget=200)
    [(bundle_id,)] = con.execute("SELECT bundle_id FROM rms_receipts").fetchall()
    assert rms_duck.replay(con, bundle_id).receipt_id == bundle.receipt_id
    assert rms_duck.replay(con, uuid.UUID(bundle.receipt_id)).identical


@pytest.fixture
def stored(con):
    rid = rms_duck.pack(con, pa.Table.from_pylist(
        [{"id": "a", "score": 0.4, "content": "first"}, {"id": "b", "score": 0.3,
                                                          "content": "second"}]),
        budget=200).receipt_id
    return con, rid


@pytest.mark.parametrize("value, message", [
    ("nope", r"receipt_id must be a UUID, got 'nope'; pass a receipt_id or bundle_id"),
    (str(uuid.UUID(int=7)), (r"unknown receipt '00000000-0000-0000-0000-000000000007'.*"
                             r"SELECT receipt_id, bundle_id FROM rms_receipts")),
])
def test_replay_and_explain_reject_unknown_ids(stored, value, message):
    con, _ = stored
    with pytest.raises(ReceiptError, match=message):
        rms_duck.replay(con, value)
    with pytest.raises(ReceiptError, match=message):
        explain(con, value)


def test_replay_refuses_a_receipt_whose_bundle_is_gone(stored):
    con, rid = stored
    con.execute("DELETE FROM rms_bundles")
    with pytest.raises(ReceiptError, match="has no bundle.*restore the bundle row"):
        rms_duck.replay(con, rid)
    [(identical, error)] = con.execute("SELECT identical, error FROM rms_replay()").fetchall()
    assert identical is False and "bundle row is missing" in error


def test_replay_refuses_edited_inputs(stored):
    con, rid = stored
    edited = json.dumps([{"id": "a", "score": 0.4, "content": "forged"}])
    con.execute("UPDATE rms_bundles SET inputs = ?", [edited])
    with pytest.raises(ReceiptError, match="inputs were edited, so a replay would prove nothing"):
        rms_duck.replay(con, rid)
    assert con.execute("SELECT identical, inputs_intact FROM rms_replay(?)", [rid]).fetchall() \
        == [(False, False)]


def test_replay_refuses_malformed_receipts(stored):
    con, rid = stored
    con.execute("UPDATE rms_receipts SET receipt = 'garbage'")
    with pytest.raises(ReceiptError, match="is not valid JSON.*verify_receipts"):
        rms_duck.replay(con, rid)
    [(error,)] = con.execute("SELECT error FROM rms_replay()").fetchall()
    assert error.startswith("ReceiptError: the receipt is not valid JSON")
    con.execute("UPDATE rms_receipts SET receipt = '[1, 2]'")
    with pytest.raises(ReceiptError, match="must be a JSON object, got '\\[1, 2\\]'"):
        rms_duck.replay(con, rid)
    [(error,)] = con.execute("SELECT error FROM rms_replay()").fetchall()
    assert error == ("ReceiptError: the receipt must be a JSON object, got '[1, 2]'; restore "
                     "it from a backup")


def test_sql_replay_names_an_unknown_id(stored):
    con, _ = stored
    with pytest.raises(Exception, match='unknown receipt "nope"; pass a receipt_id or bundle_id'):
        con.execute("SELECT * FROM rms_replay('nope')").fetchall()


@pytest.mark.parametrize("inputs, budget, message", [
    ("{bad", 100, "stored inputs are not valid JSON"),
    ('{"id": 1}', 100, "must be a JSON list of candidates"),
    ("[]", None, "has no 'budget' field, got None"),
])
def test_repack_errors_name_the_value_and_the_fix(inputs, budget, message):
    with pytest.raises(ReceiptError, match=message) as info:
        repack(inputs, budget=budget, config=None)
    assert "restore" in str(info.value)


def test_replay_udf_reports_bad_rows_instead_of_failing(con):
    # Canonical, as every stored receipt is (replay refuses any other spelling).
    receipt = canonical_json({"budget": 200, "receipt_version": 2, "candidates": [],
                              "encoding": {"name": "cl100k_base", "sha256": "0" * 64}})
    rows = con.execute(
        "SELECT rms_replay_udf(i, ?) FROM (VALUES "
        "('[{\"id\": \"x\", \"score\": 7, \"content\": \"c\"}]'), (NULL), "
        "('[{\"id\": \"x\", \"score\": 0.5, \"content\": \"c\"}]')) t(i)",
        [receipt]).fetchall()
    first, second, third = (r[0] for r in rows)
    assert first["context_sha256"] is None
    assert first["error"].startswith("CandidateError: candidate #0 (id 'x'): field 'score'")
    assert second["error"] == "no stored inputs: the receipt's bundle row is missing"
    assert third["error"] is None and len(third["context_sha256"]) == 64
    # The made-up receipt recorded no decisions and another tokenizer: both are reported.
    assert third["same_decisions"] is False and third["encoding_changed"] is True


# -- explain --------------------------------------------------------------------------------

def test_explain_gives_one_row_per_candidate_matching_the_bundle(demo, demo_db):
    bundle = demo_db[1][2]
    sql_rows = demo.execute(
        "SELECT node_id, decision, reason, chosen, tokens, tried FROM "
        "rms_receipt_candidates(?)", [bundle.receipt_id]).fetchall()
    assert len(sql_rows) == len(bundle.included) + len(bundle.excluded)
    included = [r for r in sql_rows if r[1] == "included"]
    assert [r[0] for r in included] == [rec.id for rec in bundle.included]
    assert [(r[3], r[4]) for r in included] == \
        [(rec.representation.value, rec.tokens) for rec in bundle.included]
    dropped = {r[0]: r[2] for r in sql_rows if r[1] == "excluded"}
    assert dropped == {rec.id: rec.reason.value for rec in bundle.excluded}
    assert dropped and all(r[5] for r in included)


def test_why_was_it_dropped_is_one_query(demo, demo_db):
    bundle = demo_db[1][2]
    victim = bundle.excluded[0]
    rows = demo.execute(
        "SELECT seq, decision, reason, score, tier FROM rms_receipt_decisions "
        "WHERE node_id = ? ORDER BY seq", [victim.id]).fetchall()
    assert [r[0] for r in rows] == [1, 2, 3]
    assert rows[-1][1:3] == ("excluded", victim.reason.value)
    assert rows[-1][3] == victim.score


def test_explain_in_python_matches_sql_and_takes_a_bundle_id(demo, demo_db):
    bundle = demo_db[1][2]
    [(bundle_id,)] = demo.execute("SELECT bundle_id FROM rms_receipts WHERE receipt_id = ?",
                                  [bundle.receipt_id]).fetchall()
    python_rows = explain(demo, bundle_id)
    sql_rows = demo.sql(f"SELECT * FROM rms_receipt_candidates('{bundle.receipt_id}')") \
        .to_arrow_table().to_pylist()
    assert python_rows == sql_rows
    assert {"score", "tier", "order_key", "tried", "chosen", "tokens", "decision", "reason",
            "str"} <= set(python_rows[0])


def test_sql_explain_names_an_unknown_id(demo):
    with pytest.raises(Exception, match='unknown receipt "nope"; pass a receipt_id or bundle_id'):
        demo.execute("SELECT * FROM rms_receipt_candidates('nope')").fetchall()


def test_the_reserved_head_of_the_balanced_ordering_has_order_key_inf(con):
    table = pa.Table.from_pylist([
        {"id": name, "score": score, "content": f"note {name}", "paths": ["LEXICAL", "VECTOR"]}
        for name, score in (("a", 0.9), ("b", 0.5), ("c", 0.7))])
    bundle = rms_duck.pack(con, table, budget=300)
    recorded = {c["id"]: c["order_key"] for c in json.loads(bundle.receipt)["candidates"]}
    keys = dict(con.execute("SELECT node_id, order_key FROM rms_receipt_candidates(?)",
                            [bundle.receipt_id]).fetchall())
    assert recorded["a"] == "head" and keys["a"] == float("inf")
    assert keys["b"] == recorded["b"] and keys["c"] == recorded["c"]


# -- metrics --------------------------------------------------------------------------------

def test_bundle_metrics_equal_sql_over_the_receipt(demo):
    rows = demo.execute(
        "SELECT b.str_mean, avg(d.str), b.str_p10, quantile_cont(d.str, 0.1), "
        "b.budget_efficiency, sum(d.tokens) / b.available "
        "FROM rms_bundles AS b JOIN rms_receipt_decisions AS d USING (bundle_id) "
        "WHERE d.decision = 'included' "
        "GROUP BY b.bundle_id, b.str_mean, b.str_p10, b.budget_efficiency, b.available"
    ).fetchall()
    assert len(rows) == 3
    for mean, sql_mean, p10, sql_p10, efficiency, sql_efficiency in rows:
        assert mean == pytest.approx(sql_mean, rel=1e-12)
        assert p10 == pytest.approx(sql_p10, rel=1e-12)
        assert efficiency == pytest.approx(sql_efficiency, rel=1e-12)


def test_session_metrics_follow_rfc_section_8(demo, demo_db):
    bundles = demo_db[1]
    ratios = sorted(str_value(r.score, r.tokens) for b in bundles for r in b.included)
    used = sum(r.tokens for b in bundles for r in b.included)
    [row] = demo.sql("SELECT * FROM rms_session_metrics").to_arrow_table().to_pylist()
    assert row["session_id"] == "demo" and row["bundles"] == 3
    assert row["included_records"] == len(ratios)
    assert row["session_str_mean"] == pytest.approx(sum(ratios) / len(ratios))
    assert row["session_str_p10"] == pytest.approx(_quantile(ratios, 0.10))
    assert row["budget_efficiency"] == pytest.approx(used / sum(b.available for b in bundles))
    assert row["budget_waste"] == 0.0
    assert row["str_mean_trend"] is not None


def reference_budget(rows: list[dict], config: dict) -> int:
    """A budget at which some record is packed as REFERENCE (found, not hard-coded)."""
    for budget in range(150, 600, 5):
        bundle = rms_duck.pack_candidates(rows, budget=budget, config=config)
        if any(r.representation.value == "reference" for r in bundle.included):
            return budget
    raise AssertionError("no budget packs a REFERENCE record")


def test_session_trends_and_budget_waste(con):
    config = {"context_format": "auditable"}
    long = [{"id": "big", "score": 0.9, "content": " ".join(f"w{i}" for i in range(400))},
            {"id": "small", "score": 0.5, "content": "short note"}]
    tight = reference_budget(long, config)
    for score in (0.9, 0.5, 0.1):
        table = pa.Table.from_pylist([{"id": "n", "score": score, "content": "same text"}])
        rms_duck.pack(con, table, budget=300, config=config, session_id="s1")
    waste = rms_duck.pack(con, pa.Table.from_pylist(long), budget=tight, config=config,
                          session_id="s2")
    rms_duck.pack(con, pa.Table.from_pylist(long[1:]), budget=300)  # no session
    rows = {r["session_id"]: r for r in
            con.sql("SELECT * FROM rms_session_metrics").to_arrow_table().to_pylist()}
    assert set(rows) == {"s1", "s2", None}
    assert rows["s1"]["str_mean_trend"] < 0 and rows["s1"]["budget_waste_trend"] == 0
    assert rows["s2"]["str_mean_trend"] is None  # one bundle has no trend
    reference = sum(r.tokens for r in waste.included if r.representation.value == "reference")
    assert reference > 0
    assert rows["s2"]["budget_waste"] == pytest.approx(reference / waste.available)
    assert rows["s2"]["budget_waste"] == pytest.approx(waste.metrics["budget_waste"])


def test_query_shapes_group_bundles_by_fingerprint(con):
    add_nodes(con, ["alpha", "beta"])
    for limit in (1, 2):
        rms_duck.pack(con, f"SELECT CAST(id AS VARCHAR) AS id, 0.5 AS score, content "
                           f"FROM rms_nodes LIMIT {limit}", budget=300)
    rms_duck.pack(con, pa.Table.from_pylist([{"id": "x", "score": 0.5, "content": "y"}]),
                  budget=300)
    shapes = con.execute("SELECT fingerprint IS NULL, bundles, distinct_sql "
                         "FROM rms_query_shapes ORDER BY 1").fetchall()
    assert shapes == [(False, 2, 2), (True, 1, 0)]


# -- CLI ------------------------------------------------------------------------------------

def test_audit_command_prints_the_summary(demo_db, capsys):
    assert main(["audit", "--db", demo_db[0], "--replay"]) == 0
    out = capsys.readouterr().out
    assert "bundles     3 (" in out and "receipt chains: maya 3" in out
    assert "exclusions  BUDGET_EXHAUSTED" in out
    assert "\n            demo " in out and "STR mean" in out
    assert "verify      OK: 3 receipt(s) in 1 chain(s)" in out
    assert "replay      OK: 3 of 3 receipt(s) reproduce their bytes" in out


def test_audit_command_prints_json(demo_db, capsys):
    assert main(["audit", "--db", demo_db[0], "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is True and report["bundles"] == 3 and report["problems"] == []
    assert report["session_metrics"][0]["session_id"] == "demo"


def copy_db(source: str, target: Path) -> str:
    for suffix in ("", ".wal"):
        if Path(source + suffix).exists():
            shutil.copy(source + suffix, str(target) + suffix)
    return str(target)


def test_audit_command_fails_when_verification_fails(demo_db, tmp_path, capsys):
    path = copy_db(demo_db[0], tmp_path / "tampered.duckdb")
    con = rms_duck.connect(path)
    con.execute("UPDATE rms_receipts SET receipt = replace(receipt, '\"budget\":4096', "
                "'\"budget\":9999') WHERE seq = 2")
    con.close()
    assert main(["audit", "--db", path]) == 1
    out = capsys.readouterr().out
    assert "verify      FAILED: 3 problem(s)" in out
    assert "DIGEST_MISMATCH at chain 'maya' seq 2" in out and "CHAIN_BROKEN" in out
    assert "BUNDLE_FIELD_MISMATCH at chain 'maya' seq 2: bundle column budget" in out


def test_audit_command_fails_when_a_replay_differs(demo_db, tmp_path, capsys):
    path = copy_db(demo_db[0], tmp_path / "replay.duckdb")
    con = rms_duck.connect(path)
    # Swap in other inputs with a matching digest: the replay packs them and differs.
    con.execute("UPDATE rms_bundles SET inputs = '[]'")
    con.execute("UPDATE rms_receipts SET receipt = replace(receipt, json_extract_string("
                "receipt, '$.inputs_sha256'), sha256('[]')) WHERE seq > 1")
    con.close()
    assert main(["audit", "--db", path, "--replay"]) == 1
    out = capsys.readouterr().out
    assert "replay      FAILED (3 differ)" in out
    assert "inputs were edited, so a replay would prove nothing" in out  # seq 1 kept its digest


@pytest.mark.parametrize("kind", ["missing", "not-a-database"])
def test_audit_command_explains_a_bad_db_path(tmp_path, capsys, kind):
    path = tmp_path / "x.duckdb"
    if kind == "not-a-database":
        path.write_text("hello")
    assert main(["audit", "--db", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and ("is not a file" in err or "not a valid DuckDB" in err)


def test_audits_work_on_a_read_only_connection(demo_db):
    con = rms_duck.connect(demo_db[0], read_only=True)
    try:
        assert rms_duck.verify_receipts(con) == []
        rid = demo_db[1][0].receipt_id
        assert rms_duck.replay(con, rid).identical
        assert explain(con, rid)
        assert con.execute("SELECT bool_and(identical) FROM rms_replay()").fetchall() == [(True,)]
    finally:
        con.close()


# -- problem codes --------------------------------------------------------------------------

def _view_problem_codes(con) -> list[str]:
    """The literal problem code of each UNION ALL branch of rms_receipt_problems, in order."""
    import sqlglot
    from sqlglot import exp

    sql = con.execute("SELECT sql FROM duckdb_views() "
                      "WHERE view_name = 'rms_receipt_problems'").fetchall()[0][0]

    def branches(node):
        while isinstance(node, exp.Subquery):
            node = node.this
        if isinstance(node, exp.Union):
            yield from branches(node.this)
            yield from branches(node.expression)
        else:
            yield node

    codes = []
    for select in branches(sqlglot.parse_one(sql, read="duckdb").expression):
        problem = select.expressions[4]
        problem = problem.this if isinstance(problem, exp.Alias) else problem
        assert isinstance(problem, exp.Literal) and problem.is_string, problem.sql()
        codes.append(problem.name)
    return codes


def test_problems_are_exactly_what_the_view_can_emit(con):
    from rms_duck.audit.verify import PROBLEMS
    codes = _view_problem_codes(con)
    assert "BUNDLE_FIELD_MISMATCH" in codes
    assert list(PROBLEMS) == codes


def test_docs_list_every_problem_code_with_its_meaning():
    from rms_duck.audit.verify import PROBLEMS
    page = (Path(__file__).parent.parent / "docs" / "audits.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `([A-Z_]+)` \| (.+) \|$", page, re.M)
    assert rows == list(PROBLEMS.items())


def test_the_summary_does_not_call_bundles_stored_from_sql_arrow_input(tmp_path, capsys):
    """rms_store's bundles (from a nightly SQL job) were listed as "(no query: Arrow
    input)", which sent an auditor looking for a DataFrame that never existed."""
    db = str(tmp_path / "job.duckdb")
    con = rms_duck.connect(db)
    con.execute("SELECT rms_store([{'id': 'a', 'score': 0.5, 'content': 'x'}], 300) AS r"
                ).fetchall()
    con.close()
    assert main(["audit", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "(no ranking query: candidates passed in)  1 bundle(s)" in out
    assert "Arrow" not in out

"""Receipts: canonical bytes, the documented field list, UTC, the hash chain, and tampering.

Every tampering case is checked twice: through rms_duck.verify_receipts() and through the
SQL table macro rms_verify_receipts(); both must name the same problems.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rms_duck
from rms_duck.candidates import to_candidates
from rms_duck.escape import canonical_json
from rms_duck.packing.represent import has_memory_text
from rms_duck.receipts import CANDIDATE_FIELDS, RECEIPT_FIELDS, RECEIPT_VERSION, seal_receipt
from rms_duck.records import Level
from tests.thorough import examples


def note(i: int, *, namespace: str | None = None, score: float = 0.5) -> pa.Table:
    return pa.Table.from_pylist([
        {"id": f"n{i}", "score": score, "content": f"note number {i} about the move",
         "namespace_id": namespace},
        {"id": f"m{i}", "score": score / 2, "content": f"minor detail {i}"},
    ])


def store(con, n: int, namespace: str = "ns") -> list[str]:
    return [rms_duck.pack(con, note(i), budget=300, namespace=namespace).receipt_id
            for i in range(n)]


def receipts(con):
    return con.execute(
        "SELECT CAST(receipt_id AS VARCHAR), CAST(bundle_id AS VARCHAR), chain_namespace, seq, "
        "prev_sha256, receipt_version, receipt, receipt_sha256, context_sha256, created_at "
        "FROM rms_receipts ORDER BY chain_namespace, seq").fetchall()


def problems(con) -> set[tuple[str, int | None, str | None]]:
    """(problem, seq, bundle_id) from Python, after checking SQL reports the same."""
    from_python = {(p.problem, p.seq, p.bundle_id) for p in rms_duck.verify_receipts(con)}
    from_sql = {(p, s, b) for p, s, b in con.execute(
        "SELECT problem, seq, CAST(bundle_id AS VARCHAR) FROM rms_verify_receipts()").fetchall()}
    assert from_python == from_sql
    return from_python


def codes(con) -> set[tuple[str, int | None]]:
    return {(p, s) for p, s, _ in problems(con)}


# -- format ---------------------------------------------------------------------------------

def test_stored_receipt_is_canonical_json_with_exactly_the_documented_fields(con):
    [rid] = store(con, 1)
    [(receipt_id, bundle_id, chain, seq, prev, version, text, digest, context_sha, _)] = \
        receipts(con)
    body = json.loads(text)
    assert receipt_id == rid and body["receipt_id"] == rid and body["bundle_id"] == bundle_id
    assert canonical_json(body) == text
    assert set(body) == set(RECEIPT_FIELDS)
    assert all(set(c) == set(CANDIDATE_FIELDS) for c in body["candidates"])
    assert version == body["receipt_version"] == RECEIPT_VERSION == 9
    assert digest == hashlib.sha256(text.encode()).hexdigest()
    assert con.execute("SELECT sha256(receipt) = receipt_sha256 FROM rms_receipts").fetchall() \
        == [(True,)]
    [(context,)] = con.execute("SELECT context FROM rms_bundles").fetchall()
    assert context_sha == body["context_sha256"] == hashlib.sha256(context.encode()).hexdigest()
    assert (chain, seq, prev) == ("ns", 1, None)


def test_a_stored_bundle_carries_the_receipt_body_its_store_sealed(con):
    """The body of the stored receipt is the bundle's own receipt plus the chain fields,
    and the bundle returned keeps what storing derived (it is not derived a second time)."""
    stored = rms_duck.pack(con, note(1), budget=300, namespace="ns")
    unstored = rms_duck.pack(con, note(1), budget=300, store=False)
    assert stored.receipt_id and unstored.receipt_id is None
    assert "fragments" in stored._derived  # derived once, while storing
    assert stored.receipt == unstored.receipt
    [(_, _, _, _, _, _, text, _, _, _)] = receipts(con)
    chain = {"receipt_id", "bundle_id", "created_at", "chain_namespace", "seq", "prev_sha256",
             "inputs_sha256", "query", "session_id"}
    sealed = {k: v for k, v in json.loads(text).items() if k not in chain}
    assert sealed == json.loads(stored.receipt)


def test_receipt_times_are_utc_whatever_the_session_time_zone(con):
    con.execute("SET TimeZone = 'Asia/Tokyo'")
    store(con, 1)
    con.execute("SET TimeZone = 'UTC'")
    [row] = receipts(con)
    body = json.loads(row[6])
    assert body["created_at"].endswith("+00:00")
    assert row[9].utcoffset().total_seconds() == 0
    assert row[9].isoformat() == body["created_at"]


def test_seal_receipt_is_deterministic():
    from datetime import UTC, datetime
    args = {"receipt_id": "r", "bundle_id": "b", "created_at": datetime(2026, 1, 1, tzinfo=UTC),
            "chain_namespace": "x", "seq": 3, "prev_sha256": "ab", "inputs": "[]",
            "query": None, "session_id": "s"}
    assert seal_receipt({"b": 1, "a": [2]}, **args) == seal_receipt({"a": [2], "b": 1}, **args)


_KEYS = st.sampled_from(["a", "budget", "bundle_id", "candidates", "flags", "metrics", "seq",
                         "receipt_id", "zz", "prev_sha256", "query", "é", "created_at", "~"])
_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8)
                       | st.floats(allow_nan=False, allow_infinity=False),
                       lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=6)


@given(body=st.dictionaries(_KEYS, _VALUES, max_size=8), seq=st.integers(1, 10**12),
       prev=st.none() | st.text(max_size=70), namespace=st.text(max_size=10),
       session=st.none() | st.text(max_size=10), ids=st.tuples(st.text(max_size=40),
                                                            st.text(max_size=40)),
       query=st.none() | st.dictionaries(st.text(max_size=4), _VALUES, max_size=3))
@settings(max_examples=examples(200), deadline=None)
def test_a_sealed_receipt_is_the_canonical_json_of_body_and_chain(body, seq, prev, namespace,
                                                                  session, ids, query):
    """Storage seals from a template cut around the fields only it knows
    (receipts.receipt_template); joined, it is canonical_json of the whole receipt, with
    the chain's values in place of any the body held, for any keys and values."""
    from datetime import UTC, datetime, timedelta

    created = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(microseconds=seq)
    chain = {"receipt_id": ids[0], "bundle_id": ids[1], "created_at": created.isoformat(),
             "chain_namespace": namespace, "seq": seq, "prev_sha256": prev,
             "inputs_sha256": hashlib.sha256(b"[1]").hexdigest(), "query": query,
             "session_id": session}
    text, digest = seal_receipt(
        body, receipt_id=ids[0], bundle_id=ids[1], created_at=created,
        chain_namespace=namespace, seq=seq, prev_sha256=prev, inputs="[1]", query=query,
        session_id=session)
    assert text == canonical_json({**body, **chain})
    assert digest == hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def test_docs_document_every_receipt_field_and_the_version():
    page = (Path(__file__).parent.parent / "docs" / "audits.md").read_text(encoding="utf-8")
    start = page.index("## Receipt format")
    end = page.find("\n## ", start + 1)
    section = page[start:end if end != -1 else None]
    missing = [name for name in [*RECEIPT_FIELDS, *CANDIDATE_FIELDS] if f"`{name}`" not in section]
    assert not missing, f"docs/audits.md receipt format lacks {missing}"
    assert "receipt_version" in section


def test_the_receipt_version_field_names_every_change_of_version_7():
    # It named two of version 7's five changes (the ladder and folding), as if a version-6
    # receipt differed from a new one only there; packing/compat.py and formats/legacy.py
    # replay the other three too.
    page = (Path(__file__).parent.parent / "docs" / "audits.md").read_text(encoding="utf-8")
    row = next(line for line in page.splitlines() if line.startswith("| `receipt_version` |"))
    for text in (row, RECEIPT_FIELDS["receipt_version"]):
        six = text[text.index("6 before"):text.index("5 before")]
        for change in ("ladder", "folding", "min_score", "adjacent", "speaker"):
            assert change in six, (change, six)


def test_the_receipt_format_table_names_the_config_and_query_keys_a_receipt_holds(con):
    """The table said `config` held every PackingConfig field, defaults included, and
    `query` {sql, fingerprint, dialect, sqlglot_version}: a default receipt has no
    min_score, and every query records its tables."""
    from rms_duck.config import FIELD_NAMES

    page = (Path(__file__).parent.parent / "docs" / "audits.md").read_text(encoding="utf-8")
    rows = {line.split("|")[1].strip(" `"): line.split("|")[2]
            for line in page.splitlines() if line.startswith("| `")}
    con.execute("CREATE TABLE notes AS SELECT 'a' AS id, 0.5 AS score, 'x' AS content")
    stored = rms_duck.pack(con, "SELECT * FROM notes", budget=300)
    body = json.loads(con.execute("SELECT receipt FROM rms_receipts WHERE receipt_id = ?",
                                  [stored.receipt_id]).fetchall()[0][0])
    left_out = set(FIELD_NAMES) - set(body["config"])
    assert left_out == {"min_score"}
    for name in left_out:
        assert f"`{name}` only when set" in rows["config"]
        assert f"{name} only when set" in RECEIPT_FIELDS["config"]
    for key in body["query"]:
        assert key in rows["query"].split("}")[0], key
        assert key in RECEIPT_FIELDS["query"].split("}")[0], key


# -- chain --------------------------------------------------------------------------------

def test_each_namespace_has_its_own_chain_linked_by_digest(con):
    for i in range(3):
        rms_duck.pack(con, note(i), budget=300, namespace="a")
        if i < 2:
            rms_duck.pack(con, note(i), budget=300, namespace="b")
    rows = receipts(con)
    assert [(r[2], r[3]) for r in rows] == [("a", 1), ("a", 2), ("a", 3), ("b", 1), ("b", 2)]
    for earlier, later in itertools.pairwise(rows):
        if earlier[2] == later[2]:
            assert later[4] == earlier[7] == json.loads(later[6])["prev_sha256"]
    assert rms_duck.verify_receipts(con) == []


def test_chain_defaults_to_the_candidates_shared_namespace(con):
    table = pa.Table.from_pylist([{"id": "x", "score": 0.5, "content": "hi", "namespace_id": "ws"}])
    rms_duck.pack(con, table, budget=200)
    assert receipts(con)[0][2] == "ws"


def test_empty_database_verifies(con):
    assert rms_duck.verify_receipts(con) == []
    assert con.execute("SELECT count(*) FROM rms_verify_receipts()").fetchall() == [(0,)]


# -- tampering ------------------------------------------------------------------------------

@pytest.fixture
def chain(con):
    """Five receipts in chain 'ns'; returns (con, rows ordered by seq)."""
    store(con, 5)
    return con, receipts(con)


@pytest.mark.parametrize("position", [0, 1, 200, -2, -1], ids=lambda p: f"byte{p}")
def test_one_changed_byte_is_caught(chain, position):
    con, rows = chain
    text = rows[2][6]
    i = position % len(text)
    edited = text[:i] + ("X" if text[i] != "X" else "Y") + text[i + 1:]
    con.execute("UPDATE rms_receipts SET receipt = ? WHERE seq = 3", [edited])
    found = codes(con)
    assert ("DIGEST_MISMATCH", 3) in found
    assert ("CHAIN_BROKEN", 4) in found  # the next receipt recorded the old digest


def test_an_edit_with_a_recomputed_digest_still_breaks_the_chain(chain):
    con, rows = chain
    edited = rows[1][6].replace('"budget":300', '"budget":900')
    assert edited != rows[1][6]
    con.execute("UPDATE rms_receipts SET receipt = ?, receipt_sha256 = sha256(?) WHERE seq = 2",
                [edited, edited])
    # The edited budget no longer matches the bundle row, and the next link breaks.
    assert codes(con) == {("BUNDLE_FIELD_MISMATCH", 2), ("CHAIN_BROKEN", 3)}


@pytest.mark.parametrize("seq", [1, 3])
def test_a_deleted_receipt_is_caught(chain, seq):
    con, rows = chain
    con.execute("DELETE FROM rms_receipts WHERE seq = ?", [seq])
    found = problems(con)
    after = seq + 1
    assert ("CHAIN_GAP", after, rows[after - 1][1]) in found
    assert ("CHAIN_BROKEN", after, rows[after - 1][1]) in found
    assert ("RECEIPT_MISSING", None, rows[seq - 1][1]) in found


def test_deleting_the_last_receipt_leaves_its_bundle_without_one(chain):
    con, rows = chain
    con.execute("DELETE FROM rms_receipts WHERE seq = 5")
    assert problems(con) == {("RECEIPT_MISSING", None, rows[4][1])}


def test_swapped_sequence_numbers_are_caught(chain):
    con, _ = chain
    con.execute("UPDATE rms_receipts SET seq = -2 WHERE seq = 2")
    con.execute("UPDATE rms_receipts SET seq = 2 WHERE seq = 4")
    con.execute("UPDATE rms_receipts SET seq = 4 WHERE seq = -2")
    found = codes(con)
    assert {("FIELD_MISMATCH", 2), ("FIELD_MISMATCH", 4)} <= found
    assert {("CHAIN_BROKEN", 2), ("CHAIN_BROKEN", 3), ("CHAIN_BROKEN", 4)} <= found


def test_swapped_receipt_texts_are_caught(chain):
    con, rows = chain
    for seq, source in ((2, rows[3]), (4, rows[1])):
        con.execute("UPDATE rms_receipts SET receipt = ?, receipt_sha256 = ? WHERE seq = ?",
                    [source[6], source[7], seq])
    found = codes(con)
    assert {("FIELD_MISMATCH", 2), ("FIELD_MISMATCH", 4), ("CHAIN_BROKEN", 2)} <= found
    details = " ".join(p.detail for p in rms_duck.verify_receipts(con))
    assert "column seq is 2 but the digested receipt records 4" in details


@pytest.mark.parametrize("also_digest", [False, True], ids=["context", "context+digest"])
def test_an_edited_bundle_context_is_caught(chain, also_digest):
    con, rows = chain
    bundle = rows[2][1]
    con.execute("UPDATE rms_bundles SET context = context || 'injected' WHERE bundle_id = ?",
                [bundle])
    if also_digest:
        con.execute("UPDATE rms_bundles SET context_sha256 = sha256(context) WHERE bundle_id = ?",
                    [bundle])
    assert problems(con) == {("CONTEXT_MISMATCH", 3, bundle)}


def test_edited_inputs_and_deleted_bundles_are_caught(chain):
    con, rows = chain
    con.execute("UPDATE rms_bundles SET inputs = '[]' WHERE bundle_id = ?", [rows[0][1]])
    con.execute("DELETE FROM rms_bundles WHERE bundle_id = ?", [rows[1][1]])
    assert codes(con) == {("INPUTS_MISMATCH", 1), ("BUNDLE_MISSING", 2)}


@pytest.mark.parametrize("column, value", [
    ("created_at", "2020-01-01 00:00:00+00"), ("receipt_version", 1),
    ("context_sha256", "0" * 64), ("prev_sha256", "f" * 64),
])
def test_an_edited_column_is_caught(chain, column, value):
    con, _ = chain
    con.execute(f"UPDATE rms_receipts SET {column} = ? WHERE seq = 3", [value])
    found = rms_duck.verify_receipts(con)
    assert [(p.problem, p.seq) for p in found if p.problem == "FIELD_MISMATCH"] == \
        [("FIELD_MISMATCH", 3)]
    [mismatch] = [p for p in found if p.problem == "FIELD_MISMATCH"]
    assert mismatch.detail.startswith(f"column {column} is ")
    assert mismatch.detail.endswith("restore it from a backup")


def test_malformed_receipt_json_is_reported_not_raised(chain):
    con, _ = chain
    con.execute("UPDATE rms_receipts SET receipt = '{not json' WHERE seq = 2")
    assert {("MALFORMED_RECEIPT", 2), ("DIGEST_MISMATCH", 2), ("CHAIN_BROKEN", 3)} <= codes(con)
    # The per-candidate view skips the broken receipt instead of failing.
    assert con.execute("SELECT count(DISTINCT seq) FROM rms_receipt_decisions").fetchall() == \
        [(4,)]


def test_problem_str_names_the_place_and_the_fix(chain):
    con, _ = chain
    con.execute("UPDATE rms_receipts SET receipt_sha256 = 'x' WHERE seq = 1")
    [problem] = rms_duck.verify_receipts(con)
    assert str(problem).startswith("DIGEST_MISMATCH at chain 'ns' seq 1: receipt_sha256 is x")
    assert "restore the row from a backup" in str(problem)


def test_verify_reports_a_database_without_the_schema_and_writes_nothing():
    import duckdb

    bare = duckdb.connect()
    problems = rms_duck.verify_receipts(bare)
    missing = {p.object_name for p in problems if p.problem == "STORED_OBJECT_MISSING"}
    assert {"rms_receipts", "rms_bundles"} <= missing
    assert "rms_duck.connect(path)" in str(problems[0])
    assert bare.execute("SELECT count(*) FROM duckdb_tables()").fetchone() == (0,)


HAS_CONTENT_ROWS = [
    {"id": "pin", "score": 0.9, "pinned": True, "prose": "Metric units, always.",
     "content": "Use metric units in every answer, including distances and weights. " * 3},
    {"id": "blank", "score": 0.8, "pinned": True, "content": "   "},
    {"id": "fact", "score": 0.7, "type": "fact", "content": "Maya lives in Toronto."},
    {"id": "note", "score": 0.2, "content": "The storage budget report is due Friday. " * 4},
]


@pytest.mark.parametrize("context_format", ["auditable", "compact", "reader"])
def test_candidates_carry_has_content_by_the_memory_text_rule(context_format):
    """has_content (RFC extension, R75): packed at FULL, PROSE or STRUCTURED with non-blank
    content; a pointer, a blank record and an excluded one have none."""
    seen: dict[tuple[str | None, bool], set[bool]] = {}
    for budget in range(20, 400, 7):
        bundle = rms_duck.pack_candidates(HAS_CONTENT_ROWS, budget=budget, config={
            "context_format": context_format, "overhead_tokens": 0})
        body = json.loads(bundle.receipt)
        assert canonical_json(bundle.receipt_body) == bundle.receipt  # both paths agree
        content = {r["id"]: r["content"] for r in HAS_CONTENT_ROWS}
        candidates = {c.id: c for c in to_candidates(HAS_CONTENT_ROWS)}
        for row in body["candidates"]:
            blank = not content[row["id"]].strip()
            expected = row["chosen"] is not None and has_memory_text(
                candidates[row["id"]], Level(row["chosen"]))
            assert row["has_content"] is expected, (budget, row)
            assert expected == (row["chosen"] in ("full", "prose", "structured") and not blank)
            seen.setdefault((row["chosen"], blank), set()).add(row["has_content"])
    assert seen[(None, False)] == {False}  # excluded
    assert seen[("full", False)] == {True}
    if context_format != "reader":  # the reader shows text only, and no blank record
        assert seen[("full", True)] == {False}
        assert seen[("reference", False)] == {False}
    assert ("prose", False) in seen or ("structured", False) in seen


def test_a_pack_that_stores_nothing_refuses_a_chain_or_session_to_extend(con):
    """pack(store=False, namespace=...) packed and ignored the namespace (and session_id):
    a caller who meant to store learned of it only from an empty rms_receipts."""
    for name in ("namespace", "session_id"):
        with pytest.raises(rms_duck.errors.ConfigError, match=(
                f"{name} names the receipt chain or session a stored bundle extends, but "
                f"store=False stores nothing, so {name}='s1' would be ignored; leave {name} "
                "out, or pass store=True")):
            rms_duck.pack(con, note(1), budget=300, store=False, **{name: "s1"})
    with pytest.raises(rms_duck.errors.ConfigError, match="namespace='ns' would be ignored"):
        rms_duck.duck.api.pack_rows(con, [{"id": "a", "score": 0.5, "content": "x"}],
                                    budget=300, store=False, namespace="ns")
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]
    assert rms_duck.pack(con, note(1), budget=300, store=True, namespace="ns",
                         session_id="s1").receipt_id

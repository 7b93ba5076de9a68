"""A re-sealed newest receipt (its digest recomputed, which no chain link or saved head can
vouch for yet) must still agree with its own inputs: replay is the check that covers it
(docs/security.md). These edits each passed verify and replay before."""

from __future__ import annotations

import json
import re

import duckdb
import pyarrow as pa
import pytest

import rms_duck
from rms_duck.audit.explain import explain
from rms_duck.cli import main
from rms_duck.errors import ReceiptError
from rms_duck.escape import canonical_json
from rms_duck.receipts import RECEIPT_VERSION, sha256_text


@pytest.fixture
def stored(tmp_path):
    """(path, receipt_id) of a one-receipt file whose pack dropped some records."""
    path = str(tmp_path / "resealed.duckdb")
    con = rms_duck.connect(path)
    rid = rms_duck.pack(con, pa.Table.from_pylist(
        [{"id": f"n{j}", "score": 0.5 + j / 100, "content": f"record {j} " * (3 + j)}
         for j in range(8)]), budget=150).receipt_id
    con.close()
    return path, rid


def reseal(path: str, edit) -> None:
    """Rewrite the only receipt with `edit(text) -> text` and recompute its digests, as a
    writer with plain DuckDB can."""
    con = duckdb.connect(path)
    [(text,)] = con.execute("SELECT receipt FROM rms_receipts").fetchall()
    new = edit(text)
    assert new != text
    con.execute("UPDATE rms_receipts SET receipt = ?, receipt_sha256 = ?",
                [new, sha256_text(new)])
    con.execute("UPDATE rms_chain_heads SET receipt_sha256 = ?", [sha256_text(new)])
    con.close()


def sql_replay(path: str) -> tuple:
    con = rms_duck.connect(path, read_only=True)
    try:
        [row] = con.execute("SELECT reproduced, error FROM rms_replay()").fetchall()
    finally:
        con.close()
    return row


def forged_decisions(text: str) -> str:
    """The receipt with a second 'candidates' key in front: DuckDB's JSON functions read
    the first of two equal keys, Python's json the last."""
    fake = [dict(c, reason="DUPLICATE", score=0.01) if c["decision"] == "excluded" else c
            for c in json.loads(text)["candidates"]]
    return '{"candidates":' + canonical_json(fake) + "," + text[1:]


def test_a_receipt_that_repeats_a_key_is_refused_by_replay(stored, capsys):
    path, rid = stored
    reseal(path, forged_decisions)
    con = duckdb.connect(path, read_only=True)
    # What the SQL side reads is the forged list; the chain has nothing after it to break.
    assert {r["reason"] for r in explain(con, rid) if r["decision"] == "excluded"} \
        == {"DUPLICATE"}
    assert rms_duck.verify_receipts(con) == []
    con.close()
    with pytest.raises(ReceiptError, match="repeats the key 'candidates'"):
        rms_duck.replay(rms_duck.connect(path, read_only=True), rid)
    reproduced, error = sql_replay(path)
    assert not reproduced and "repeats the key 'candidates'" in error
    assert main(["audit", "--db", path, "--replay"]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_a_receipt_in_another_spelling_of_the_same_json_is_refused_by_replay(stored):
    path, rid = stored
    reseal(path, lambda text: text.replace(',"budget":', ', "budget":'))
    with pytest.raises(ReceiptError, match="not the canonical JSON rms_duck writes"):
        rms_duck.replay(rms_duck.connect(path, read_only=True), rid)


@pytest.mark.parametrize("edit, field", [
    (lambda body: body["encoding"].update(name="cl100k_base"), None),
    (lambda body: body.update(approved_by="the auditor"), "approved_by"),
])
def test_replay_compares_every_field_the_receipt_records(stored, edit, field):
    """The encoding's name (only its sha256 was compared) and a field the pack never writes
    passed replay as reproduced."""
    path, rid = stored

    def change(text: str) -> str:
        body = json.loads(text)
        edit(body)
        return canonical_json(body)

    reseal(path, change)
    result = rms_duck.replay(rms_duck.connect(path, read_only=True), rid)
    assert result.identical and not result.reproduced
    assert result.encoding_changed is (field is None)
    assert result.differing_fields == (() if field is None else (field,))
    assert sql_replay(path) == (False, None)


def test_the_sealed_fields_are_the_documented_fields_a_pack_does_not_write():
    from rms_duck.packing.repack import repack
    from rms_duck.receipts import RECEIPT_FIELDS, SEALED_FIELDS

    body = json.loads(repack('[{"id": "n1", "score": 0.5, "content": "hello"}]', budget=200,
                             config=None).receipt)
    assert SEALED_FIELDS == set(RECEIPT_FIELDS) - set(body)


@pytest.mark.parametrize("version", [0, -1, RECEIPT_VERSION + 1])
def test_a_receipt_version_no_rms_duck_here_wrote_is_refused(stored, version):
    """Any whole number replayed with the current formats (and below 4 with version 3's
    conflict pricing), so a receipt claiming a version this rms_duck does not know was
    called reproduced."""
    path, rid = stored

    def change(text: str) -> str:
        body = json.loads(text)
        body["receipt_version"] = version
        return canonical_json(body)

    reseal(path, change)
    con = duckdb.connect(path)
    con.execute("UPDATE rms_receipts SET receipt_version = ?", [version])
    assert rms_duck.verify_receipts(con) == []
    con.close()
    message = f"'receipt_version' is {version}, but this rms_duck replays versions 1 to"
    with pytest.raises(ReceiptError, match=message):
        rms_duck.replay(rms_duck.connect(path, read_only=True), rid)
    reproduced, error = sql_replay(path)
    assert not reproduced and message in error


def test_a_receipt_that_cannot_be_replayed_is_reported_by_its_error_alone(stored, capsys):
    """The report said 'context bytes differ; decisions differ' before the error, though
    nothing was re-packed to compare."""
    path, rid = stored
    reseal(path, lambda text: text.replace('"budget":150', '"budget":150.5'))
    assert main(["audit", "--db", path, "--replay"]) == 1
    [line] = [x for x in capsys.readouterr().out.splitlines() if "DIFFERS" in x]
    assert line.startswith(f"  DIFFERS {rid}: the receipt's 'budget' must be a whole number")


DEEP = "[" * 100_000 + "]" * 100_000


def test_a_receipt_nested_too_deeply_is_a_receipt_error_not_a_crash(stored, capsys):
    """Python's json gave up with a RecursionError, which broke audit --replay (and
    --line-costs) with a traceback; DuckDB reads the text, so verify passed."""
    path, rid = stored
    reseal(path, lambda text: text[:-1] + ',"zz":' + DEEP + "}")
    con = rms_duck.connect(path, read_only=True)
    assert rms_duck.verify_receipts(con) == []
    with pytest.raises(ReceiptError, match="nested too deeply"):
        rms_duck.replay(con, rid)
    rms_duck.check_line_costs(con)
    con.close()
    reproduced, error = sql_replay(path)
    assert not reproduced and "nested too deeply" in error
    assert main(["audit", "--db", path, "--replay", "--line-costs"]) == 1
    assert "Traceback" not in capsys.readouterr().err


def test_inputs_nested_too_deeply_are_a_receipt_error_not_a_crash(stored):
    path, rid = stored

    def deep_inputs(text: str) -> str:
        body = json.loads(text)
        body["inputs_sha256"] = sha256_text(DEEP)
        return canonical_json(body)

    reseal(path, deep_inputs)
    con = duckdb.connect(path)
    con.execute("UPDATE rms_bundles SET inputs = ?", [DEEP])
    con.close()
    with pytest.raises(ReceiptError, match="stored inputs are nested too deeply"):
        rms_duck.replay(rms_duck.connect(path, read_only=True), rid)
    reproduced, error = sql_replay(path)
    assert not reproduced and "nested too deeply" in error


@pytest.mark.parametrize("edit, shown", [
    (lambda rows: rows[2].update(id=5), "candidates[2] has id 5"),
    (lambda rows: rows[0].pop("content_sha256"), "candidates[0] has content_sha256 None"),
    (lambda rows: rows.insert(1, "n1"), "candidates[1] is 'n1'"),
])
def test_an_edited_decision_is_named_by_its_position_and_value(stored, edit, shown):
    """The error said only that 'candidates' must be a list of decision objects, not which
    entry of the receipt's list was wrong or what it held."""
    path, rid = stored

    def change(text: str) -> str:
        body = json.loads(text)
        edit(body["candidates"])
        return canonical_json(body)

    reseal(path, change)
    with pytest.raises(ReceiptError, match=re.escape(shown)):
        rms_duck.replay(rms_duck.connect(path, read_only=True), rid)
    reproduced, error = sql_replay(path)
    assert not reproduced and shown in error

"""Adversarial review L11 / O21: chain heads exported outside the database catch a chain
whose newest receipts were deleted or rewritten (which the chain alone cannot)."""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa
import pytest

import rms_duck
from rms_duck.cli import main
from rms_duck.errors import ReceiptError


def fill(path, n=3, namespace="ns"):
    con = rms_duck.connect(path)
    for k in range(n):
        rms_duck.pack(con, pa.Table.from_pylist(
            [{"id": f"{k}-{j}", "score": 0.5, "content": f"note {k} {j}"} for j in range(4)]),
            budget=300, namespace=namespace)
    return con


def test_export_heads_names_each_chains_newest_receipt(tmp_path):
    con = fill(str(tmp_path / "a.duckdb"))
    fill_more = rms_duck.pack(con, pa.Table.from_pylist(
        [{"id": "x", "score": 0.5, "content": "other chain"}]), budget=300, namespace="b")
    heads = rms_duck.export_heads(con)
    assert heads["format"] == "rms_duck.chain_heads" and heads["version"] == 1
    assert [(h["chain_namespace"], h["seq"]) for h in heads["chains"]] == [("b", 1), ("ns", 3)]
    assert heads["chains"][0]["receipt_id"] == fill_more.receipt_id
    assert rms_duck.verify_receipts(con, heads=heads) == []


def test_deleting_the_newest_receipts_is_caught_by_the_heads(tmp_path):
    con = fill(str(tmp_path / "a.duckdb"))
    heads = rms_duck.export_heads(con)
    con.execute("DELETE FROM rms_bundles WHERE bundle_id IN "
                "(SELECT bundle_id FROM rms_receipts WHERE seq = 3)")
    con.execute("DELETE FROM rms_receipts WHERE seq = 3")
    assert rms_duck.verify_receipts(con) == []  # the chain alone still links
    [problem] = rms_duck.verify_receipts(con, heads=heads)
    assert problem.problem == "HEAD_MISSING" and "now ends at seq 2" in problem.detail


@pytest.mark.slow
def test_rewriting_and_rehashing_the_last_receipt_is_caught_by_the_heads(tmp_path):
    con = fill(str(tmp_path / "a.duckdb"))
    heads = rms_duck.export_heads(con)
    from rms_duck.escape import canonical_json
    from rms_duck.receipts import sha256_text
    body = json.loads(con.execute("SELECT receipt FROM rms_receipts WHERE seq = 3").fetchone()[0])
    body["budget"] += 0  # same value, new text: a trailing edit in a recomputed receipt
    body["session_id"] = "forged"
    text = canonical_json(body)
    con.execute("UPDATE rms_receipts SET receipt = ?, receipt_sha256 = ? WHERE seq = 3",
                [text, sha256_text(text)])
    con.execute("UPDATE rms_bundles SET session_id = 'forged' WHERE bundle_id = "
                "(SELECT bundle_id FROM rms_receipts WHERE seq = 3)")
    assert rms_duck.verify_receipts(con) == []
    assert [p.problem for p in rms_duck.verify_receipts(con, heads=heads)] == ["HEAD_MISMATCH"]


@pytest.mark.slow
def test_cli_exports_heads_and_checks_them(tmp_path, capsys):
    path = str(tmp_path / "a.duckdb")
    fill(path).close()
    heads_file = tmp_path / "heads.json"
    assert main(["audit", "--db", path, "--export-heads", str(heads_file)]) == 0
    assert "saved 1 chain head(s)" in capsys.readouterr().out
    assert rms_duck.read_heads(heads_file)["chains"][0]["seq"] == 3
    assert main(["audit", "--db", path, "--heads", str(heads_file)]) == 0
    assert (f"heads       OK: every chain still reaches the 1 head(s) saved in {heads_file}"
            in capsys.readouterr().out)
    con = duckdb.connect(path)
    con.execute("DELETE FROM rms_bundles WHERE bundle_id IN "
                "(SELECT bundle_id FROM rms_receipts WHERE seq = 3)")
    con.execute("DELETE FROM rms_receipts WHERE seq = 3")
    con.close()
    assert main(["audit", "--db", path]) == 0
    capsys.readouterr()
    assert main(["audit", "--db", path, "--heads", str(heads_file)]) == 1
    out = capsys.readouterr().out
    assert "HEAD_MISSING at chain 'ns' seq 3" in out
    assert f"heads       FAILED: 1 of 1 saved head(s) in {heads_file} not reached" in out


@pytest.mark.slow
def test_cli_does_not_export_heads_of_a_database_that_fails(tmp_path, capsys):
    path = str(tmp_path / "a.duckdb")
    con = fill(path)
    con.execute("UPDATE rms_receipts SET receipt_sha256 = 'x' WHERE seq = 2")
    con.close()
    heads_file = tmp_path / "heads.json"
    assert main(["audit", "--db", path, "--export-heads", str(heads_file)]) == 1
    assert "NOT saved" in capsys.readouterr().out and not heads_file.exists()


def test_write_heads_writes_nothing_for_a_database_that_fails(tmp_path):
    path = str(tmp_path / "a.duckdb")
    con = fill(path)
    con.execute("UPDATE rms_receipts SET receipt_sha256 = 'x' WHERE seq = 2")
    heads_file = tmp_path / "heads.json"
    with pytest.raises(ReceiptError, match=r"heads not written to .*the database does not verify .*"
                                           r"verify_first=False"):
        rms_duck.write_heads(con, heads_file)
    assert not heads_file.exists()
    # Asked to, it saves them anyway: the same heads export_heads() returns.
    assert rms_duck.write_heads(con, heads_file, verify_first=False) == rms_duck.export_heads(con)
    assert rms_duck.read_heads(heads_file) == rms_duck.export_heads(con)


@pytest.mark.parametrize("content", [
    "not json", '{"format": "other"}',
    '{"format": "rms_duck.chain_heads", "version": 1, "chains": [{}]}',
    # nested past Python's json (a RecursionError traceback), and a seq that is not a number
    "[" * 100_000 + "]" * 100_000,
    '{"format": "rms_duck.chain_heads", "version": 1, "chains": [{"chain_namespace": "ns", '
    '"seq": true, "receipt_sha256": "x"}]}',
    # a lone surrogate (JSON's \ud800) and a seq past BIGINT reached DuckDB: a traceback
    '{"format": "rms_duck.chain_heads", "version": 1, "chains": [{"chain_namespace": '
    '"ns\\ud800", "seq": 1, "receipt_sha256": "x"}]}',
    '{"format": "rms_duck.chain_heads", "version": 1, "chains": [{"chain_namespace": "ns", '
    '"seq": 1180591620717411303424, "receipt_sha256": "x"}]}',
])
def test_a_bad_heads_file_is_a_clear_error(tmp_path, content, capsys):
    bad = tmp_path / "heads.json"
    bad.write_text(content)
    with pytest.raises(ReceiptError, match="rms-duck audit --export-heads"):
        rms_duck.read_heads(bad)
    path = str(tmp_path / "a.duckdb")
    fill(path, n=1).close()
    assert main(["audit", "--db", path, "--heads", str(bad)]) == 1
    assert "rms-duck audit --export-heads" in capsys.readouterr().err


def test_exporting_heads_to_a_folder_that_does_not_exist_is_a_clear_error(tmp_path, capsys):
    """Audit review F8: a FileNotFoundError traceback."""
    path = str(tmp_path / "a.duckdb")
    fill(path).close()
    target = tmp_path / "missing" / "heads.json"
    assert main(["audit", "--db", path, "--export-heads", str(target)]) == 1
    err = capsys.readouterr().err
    assert f"cannot write heads file {str(target)!r}: No such file or directory" in err
    assert "Traceback" not in err


def test_a_bad_heads_entry_is_named(tmp_path):
    bad = tmp_path / "heads.json"
    bad.write_text('{"format": "rms_duck.chain_heads", "version": 1, "chains": ['
                   '{"chain_namespace": "ok", "seq": 2, "receipt_sha256": "x"}, '
                   '{"chain_namespace": "ns\\ud800", "seq": 1, "receipt_sha256": "x"}]}')
    with pytest.raises(ReceiptError, match=r"chains\[1\] is .*not a chain_namespace \(text\), "
                                           r"seq \(1\.\.9,223,372,036,854,775,807\)"):
        rms_duck.read_heads(bad)


def test_a_heads_path_given_to_verify_says_to_read_it_first(tmp_path):
    # verify_receipts(con, heads="heads.json") was told "pass a file written by `rms-duck
    # audit --export-heads`": a file was what it had been given.
    con = rms_duck.connect()
    rms_duck.pack(con, pa.Table.from_pylist([{"id": "a", "score": 0.5, "content": "x"}]),
                  budget=300)
    path = str(tmp_path / "heads.json")
    rms_duck.write_heads(con, path)
    with pytest.raises(ReceiptError) as raised:
        rms_duck.verify_receipts(con, heads=path)
    assert str(raised.value) == (
        f"heads must be the dict rms_duck.read_heads(path) returns, got the path {path!r}; "
        f"pass heads=rms_duck.read_heads({path!r})")
    assert rms_duck.verify_receipts(con, heads=rms_duck.read_heads(path)) == []

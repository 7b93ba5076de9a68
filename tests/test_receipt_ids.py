"""A receipt id names that receipt, even when a re-sealed receipt was given the same UUID
as its bundle_id: the lookup took whichever row DuckDB scanned first, so replay, explain and
SQL's rms_receipt_id() answered for the other receipt (verify passed)."""

from __future__ import annotations

import json

import duckdb
import pyarrow as pa

import rms_duck
from rms_duck.audit.explain import explain
from rms_duck.escape import canonical_json
from rms_duck.receipts import sha256_text


def test_a_receipt_id_wins_over_a_bundle_id_of_the_same_value(tmp_path):
    path = str(tmp_path / "ids.duckdb")
    con = rms_duck.connect(path)
    victim, attacker = (rms_duck.pack(con, pa.Table.from_pylist(
        [{"id": f"{k}-{j}", "score": 0.5, "content": f"note {j} of pack {k}"}
         for j in range(3)]), budget=300).receipt_id for k in range(2))
    con.close()
    plain = duckdb.connect(path)
    # The newest receipt re-sealed with bundle_id = the victim's receipt_id ...
    old_bundle, text = plain.execute(
        "SELECT bundle_id, receipt FROM rms_receipts WHERE receipt_id = ?", [attacker]).fetchone()
    body = json.loads(text)
    body["bundle_id"] = victim
    new = canonical_json(body)
    plain.execute("UPDATE rms_bundles SET bundle_id = ? WHERE bundle_id = ?", [victim, old_bundle])
    plain.execute("UPDATE rms_receipts SET bundle_id = ?, receipt = ?, receipt_sha256 = ? "
                  "WHERE receipt_id = ?", [victim, new, sha256_text(new), attacker])
    plain.execute("UPDATE rms_chain_heads SET receipt_sha256 = ?", [sha256_text(new)])
    # ... and the victim's row written again, so a scan meets the attacker's row first.
    plain.execute("CREATE TEMP TABLE kept AS SELECT * FROM rms_receipts WHERE receipt_id = ?",
                  [victim])
    plain.execute("DELETE FROM rms_receipts WHERE receipt_id = ?", [victim])
    plain.execute("INSERT INTO rms_receipts SELECT * FROM kept")
    plain.execute("CHECKPOINT")
    plain.close()
    con = rms_duck.connect(path, read_only=True)
    assert rms_duck.verify_receipts(con) == []
    assert rms_duck.replay(con, victim).receipt_id == victim
    assert {row["receipt_id"] for row in explain(con, victim)} == {victim}
    assert con.execute("SELECT CAST(rms_receipt_id(?) AS VARCHAR)", [victim]).fetchall() \
        == [(victim,)]
    con.close()
    plain = duckdb.connect(path, read_only=True)  # the macro stored for plain clients too
    assert plain.execute("SELECT CAST(rms_receipt_id(?) AS VARCHAR)", [victim]).fetchall() \
        == [(victim,)]
    assert {str(r) for (r,) in plain.execute(
        "SELECT receipt_id FROM rms_receipt_candidates(?)", [victim]).fetchall()} == {victim}
    plain.close()

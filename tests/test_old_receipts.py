"""Receipts written before o200k_base became the default still verify and replay.

tests/data/receipts_v0_2_cl100k holds three bundles and their receipt chain written by
rms_duck 0.2.0 at commit e787990 (default cl100k_base; configs without a `model` key),
exported with COPY ... (FORMAT json); make.py there is the script that wrote them.
"""

from __future__ import annotations

import json
from pathlib import Path

import rms_duck
from tests.conftest import independent_count

DATA = Path(__file__).parent / "data" / "receipts_v0_2_cl100k"


def load_old(con) -> list[str]:
    for table in ("rms_nodes", "rms_bundles", "rms_receipts"):
        con.execute(f"COPY {table} FROM '{DATA / (table + '.json')}' (FORMAT json)")
    return [r[0] for r in con.execute(
        "SELECT CAST(receipt_id AS VARCHAR) FROM rms_receipts ORDER BY seq").fetchall()]


def test_old_receipts_verify_and_replay_with_their_recorded_encoding(con):
    ids = load_old(con)
    assert len(ids) == 3
    assert rms_duck.verify_receipts(con) == []
    for rid in ids:
        result = rms_duck.replay(con, rid)
        assert result.identical and result.same_decisions and not result.encoding_changed
        assert result.bundle.config.encoding == "cl100k_base" and result.bundle.config.model is None
        assert result.bundle.tokens_used == independent_count("cl100k_base", result.bundle.context)


def test_a_new_pack_continues_the_old_chain_with_the_new_default(con):
    load_old(con)
    bundle = rms_duck.pack(con, "SELECT *, salience AS score FROM rms_nodes", budget=300,
                           session_id="new")
    assert rms_duck.verify_receipts(con) == []
    receipt = json.loads(con.execute("SELECT receipt FROM rms_receipts WHERE receipt_id = ?",
                                     [bundle.receipt_id]).fetchall()[0][0])
    assert receipt["encoding"]["name"] == "o200k_base" and receipt["seq"] == 4
    assert receipt["config"]["model"] is None
    assert bundle.tokens_used == independent_count("o200k_base", bundle.context)

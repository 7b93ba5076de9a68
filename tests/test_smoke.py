"""End-to-end smoke: pack in Python and in SQL on the real encoding."""

from __future__ import annotations

import rms_duck

from .conftest import rows


def test_pack_candidates_counts_exactly(enc):
    bundle = rms_duck.pack_candidates(rows(50), budget=400)
    assert bundle.tokens_used == len(enc.encode_ordinary(bundle.render()))
    assert bundle.tokens_used <= 400 - 100
    assert len(bundle.included) + len(bundle.excluded) == 50


def test_pack_context_in_sql(con, enc):
    [(bundle,)] = con.sql(
        "SELECT pack_context(list({'id': i::VARCHAR, 'score': 0.5, 'content': 'note ' || i}), 4096)"
        " FROM range(10) t(i)").fetchall()
    assert bundle["tokens_used"] == len(enc.encode_ordinary(bundle["context"]))
    assert len(bundle["included"]) == 10

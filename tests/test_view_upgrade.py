"""The monitoring views add their floats in a fixed order (sql/schema.sql), and files made by
an earlier release, whose views added in thread order, are upgraded without a warning."""

from __future__ import annotations

import warnings

import duckdb
import pytest

import rms_duck
from rms_duck.duck.shipped import _VIEW_EDITS, _reference, fingerprints, restore_statement
from rms_duck.errors import RmsWarning

VIEWS = sorted(_VIEW_EDITS)


def _earlier_file(path: str) -> None:
    """A file whose views are stored as the release before ordered sums stored them."""
    rms_duck.connect(path).close()
    plain = duckdb.connect(path)
    for name, edits in _VIEW_EDITS.items():
        text = restore_statement(name)
        for new, old in edits:
            text = text.replace(new, old)
        plain.execute(text)
    plain.close()


def _views(con) -> dict[str, tuple[str, str]]:
    stored = fingerprints(con)
    return {name: stored[name] for name in VIEWS}


def test_the_earlier_views_are_replaced_without_a_warning(tmp_path):
    path = str(tmp_path / "old.duckdb")
    _earlier_file(path)
    shipped = {name: _reference()[name] for name in VIEWS}
    plain = duckdb.connect(path, read_only=True)
    assert all(_views(plain)[name] != shipped[name] for name in VIEWS)
    plain.close()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        con = rms_duck.connect(path)
    assert _views(con) == shipped
    assert rms_duck.verify_receipts(con) == []
    con.close()


def test_a_read_only_file_with_the_earlier_views_verifies_and_says_nothing_of_them(tmp_path):
    path = str(tmp_path / "old.duckdb")
    _earlier_file(path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        con = rms_duck.connect(path, read_only=True)
    assert not [w for w in caught if any(name in str(w.message) for name in VIEWS)]
    assert rms_duck.verify_receipts(con) == []
    con.close()


def test_any_other_edit_of_a_view_is_still_restored_with_a_warning(tmp_path):
    path = str(tmp_path / "edited.duckdb")
    rms_duck.connect(path).close()
    plain = duckdb.connect(path)
    plain.execute(restore_statement("rms_query_shapes").replace(
        "count(*) AS bundles", "count(*) + 1 AS bundles"))
    plain.close()
    with pytest.warns(RmsWarning, match="restored the shipped definitions of rms_query_shapes"):
        con = rms_duck.connect(path)
    assert _views(con)["rms_query_shapes"] == _reference()["rms_query_shapes"]
    con.close()


@pytest.mark.slow
def test_the_views_give_the_same_bits_on_every_run_of_a_parallel_scan():
    """avg and regr_slope over a store large enough for several threads: before the ORDER
    BY, 4 of 5 runs of rms_session_metrics differed in the last bits at this size."""
    con = rms_duck.connect()
    con.execute("SET threads = 4")
    n = 20_000
    con.execute(
        "INSERT INTO rms_bundles SELECT CAST(md5('b' || i) AS UUID), TIMESTAMPTZ '2026-01-01' "
        "+ to_seconds(i::BIGINT), 'ns', 's' || (i % 3), 'q', 'compact', 4096, 4000, 3000, "
        "'ctx', 'sha', []::VARCHAR[], 3, 1, (hash(i) % 100000) / 7919.0, 0.1, "
        "(hash(i, 1) % 1000) / 997.0, (hash(i, 2) % 1000) / 991.0, '[]' FROM range(?) t(i)",
        [n])
    con.execute(
        "INSERT INTO rms_receipts SELECT CAST(md5('r' || i) AS UUID), CAST(md5('b' || i) AS "
        "UUID), TIMESTAMPTZ '2026-01-01' + to_seconds(i::BIGINT), 'ns', i + 1, NULL, 1, "
        "'{\"candidates\":[{\"id\":\"x\",\"score\":' || ((hash(i) % 1000) / 997.0) || "
        "',\"tokens\":' || (1 + i % 13) || ',\"decision\":\"included\",\"chosen\":\"full\"}]}', "
        "'sha', 'ctx' FROM range(?) t(i)", [n])
    for query in ("SELECT * FROM rms_session_metrics ORDER BY session_id",
                  "SELECT * FROM rms_query_shapes ORDER BY fingerprint"):
        runs = {tuple(tuple(v.hex() if isinstance(v, float) else v for v in row)
                      for row in con.execute(query).fetchall()) for _ in range(5)}
        assert len(runs) == 1, query

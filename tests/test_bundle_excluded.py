"""MemoryBundle.excluded is derived from the pack's trace when first read (no record is
built for a caller that only reads the context), and reads as it did when it was a field:
the same records in the same order, in equality, in pickles and through SQL."""

from __future__ import annotations

import dataclasses
import pickle

import rms_duck
from rms_duck.records import ExcludedRecord, Reason, Tier


def _pool() -> list[dict]:
    rows = [{"id": f"n{i:02}", "score": 0.9 - i / 100, "content": f"note {i} " + "word " * 40}
            for i in range(30)]
    rows.append({"id": "low", "score": 0.01, "content": "below the floor"})
    rows.append({"id": "n03", "score": 0.1, "content": "a second n03, lower"})  # duplicate
    rows.append({"id": "pin", "score": 0.2, "content": "kept first", "pinned": True})
    return rows


def test_excluded_lists_passed_over_then_below_min_score_then_duplicates():
    bundle = rms_duck.pack_candidates(_pool(), budget=400, config={"min_score": 0.05})
    excluded = bundle.excluded
    assert all(type(record) is ExcludedRecord for record in excluded)
    passed_over = [r for r in excluded if r.reason is Reason.BUDGET_EXHAUSTED]
    assert [r.id for r in passed_over] == sorted(r.id for r in passed_over)
    assert [(r.id, r.reason) for r in excluded[len(passed_over):]] == [
        ("low", Reason.BELOW_MIN_SCORE), ("n03", Reason.DUPLICATE)]
    assert excluded[-1].score == 0.1 and excluded[-1].tier is None
    assert {r.tier for r in passed_over} == {Tier.REMAINING}
    # The receipt's candidate rows say the same of each: id, reason, score and tier.
    rows = {(d.id, d.score): d for d in bundle.decisions if d.decision == "excluded"}
    for record in excluded:
        decision = rows[(record.id, record.score)]
        assert decision.reason == record.reason.value
        assert decision.tier == (None if record.tier is None else int(record.tier))
    assert bundle.excluded_count == len(excluded) == len(rows)
    assert bundle.excluded is excluded  # built once
    assert set(bundle.excluded_ids) == {r.id for r in excluded}
    assert "pin" in bundle.included_ids


def test_bundles_that_exclude_different_candidates_are_not_equal():
    kept = {"id": "a", "score": 0.9, "content": "the record that fits"}
    big = "word " * 3000  # fits no budget below
    one = rms_duck.pack_candidates([kept, {"id": "b", "score": 0.5, "content": big}], budget=300)
    other = rms_duck.pack_candidates([kept, {"id": "c", "score": 0.5, "content": big}],
                                     budget=300)
    assert one.context == other.context and one.included == other.included
    assert one != other  # only the excluded record differs
    again = rms_duck.pack_candidates([kept, {"id": "b", "score": 0.5, "content": big}],
                                     budget=300)
    assert one == again and not (one != again)
    assert one.__eq__("not a bundle") is NotImplemented


def test_a_pickled_bundle_reads_the_same_excluded_records():
    bundle = rms_duck.pack_candidates(_pool(), budget=400, config={"min_score": 0.05})
    copy = pickle.loads(pickle.dumps(bundle))
    assert copy == bundle and copy.excluded == bundle.excluded
    assert copy.receipt == bundle.receipt


def test_a_bundle_pickled_with_other_fields_is_refused_not_shifted():
    """The dataclass's __setstate__ pairs values with fields by position: a bundle pickled
    while excluded was a field loaded with conflicts holding the excluded records."""
    import pytest

    from rms_duck.bundle import MemoryBundle
    from rms_duck.errors import RmsError

    bundle = rms_duck.pack_candidates(_pool(), budget=400)
    state = list(bundle.__getstate__())
    state.insert(5, bundle.excluded)  # where excluded stood, as the earlier version wrote it
    now = len(dataclasses.fields(MemoryBundle))
    with pytest.raises(RmsError, match=rf"pickled by another version of rms_duck \({now + 1} "
                                       rf"fields, this version has {now}\).*rms_duck.replay"):
        object.__new__(MemoryBundle).__setstate__(state)


def test_sql_excluded_list_matches_the_python_bundle(con):
    rows = [r for r in _pool() if r["id"] != "pin"]
    bundle = rms_duck.pack_candidates(rows, budget=400, config={"min_score": 0.05})
    con.execute("CREATE TABLE pool (id VARCHAR, score DOUBLE, content VARCHAR)")
    con.executemany("INSERT INTO pool VALUES (?, ?, ?)",
                    [(r["id"], r["score"], r["content"]) for r in rows])
    (excluded,) = con.execute(
        "SELECT pack_context(list({'id': id, 'score': score, 'content': content}), 400, "
        "'{\"min_score\": 0.05}').excluded FROM pool").fetchone()
    assert excluded == bundle.to_row()["excluded"]
    assert [e["id"] for e in excluded] == [r.id for r in bundle.excluded]

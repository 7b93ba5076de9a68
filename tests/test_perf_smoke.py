"""`rms-duck bench --smoke`: the speed bench runs end to end and prints well-formed tables.

Shape only: timings depend on the machine, so nothing here asserts one.
"""

from __future__ import annotations

import argparse
import time

import pytest

from rms_duck.bench import perf
from rms_duck.bench.table import PACK_COLUMNS, TARGET_COLUMNS
from rms_duck.bench.workload import make_rows, rfc_literal_pack
from rms_duck.candidates import to_candidates
from rms_duck.cli import main
from rms_duck.cli.bench import add_arguments


@pytest.fixture(scope="module")
def smoke_output():
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["bench", "--smoke", "--sizes", "12,30", "--budgets", "400,1500",
                     "--repeats", "1", "--bulk", "8,16"]) == 0
    return out.getvalue()


def _tables(text: str) -> list[list[list[str]]]:
    tables, current = [], []
    for line in text.splitlines():
        if line.startswith("|"):
            current.append([cell.strip() for cell in line.strip("|").split("|")])
        elif current:
            tables.append(current)
            current = []
    if current:
        tables.append(current)
    return tables


@pytest.mark.slow
def test_smoke_bench_prints_the_three_tables(smoke_output):
    packing, bulk, targets = _tables(smoke_output)[:3]
    assert tuple(packing[0]) == PACK_COLUMNS
    assert [row[:2] for row in packing[2:]] == [
        ["12", "400"], ["12", "1,500"], ["30", "400"], ["30", "1,500"]]
    assert all(len(row) == len(PACK_COLUMNS) for row in packing)
    assert all(cell.endswith("x") or cell == "n/a" for row in packing[2:] for cell in row[4:8])
    assert [row[0].split(",")[0] for row in bulk[2:]] == [
        "token-count UDF / raw loop (throughput)", "bulk costing", "bulk packing",
        "bulk packing peak memory"]
    assert tuple(targets[0]) == TARGET_COLUMNS and len(targets) == 2 + 9
    assert "cores" in smoke_output.splitlines()[0]


def test_options_override_the_smoke_plan():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--smoke", "--sizes", "5,10_000", "--e-cap", "0.5"])
    plan = perf.plan_from_args(args)
    assert plan.sizes == (5, 10_000) and plan.e_cap == 0.5
    assert plan.budgets == perf.SMOKE.budgets
    assert perf.plan_from_args(parser.parse_args([])) == perf.FULL


def test_rfc_literal_reference_packs_within_budget_and_stops_at_its_deadline(enc):
    candidates = to_candidates(make_rows(40))
    def count(text: str) -> int:
        return len(enc.encode_ordinary(text))

    used = rfc_literal_pack(candidates, budget=600, overhead=100, count=count,
                            deadline=time.perf_counter() + 60)
    assert 0 < used <= 500
    assert rfc_literal_pack(candidates, budget=600, overhead=100, count=count,
                            deadline=time.perf_counter() - 1) is None


def test_workload_is_deterministic():
    assert make_rows(5, seed=3) == make_rows(5, seed=3)
    assert make_rows(5, seed=3) != make_rows(5, seed=4)


@pytest.mark.slow
def test_smoke_bench_prints_the_issue_targets_with_their_limits(smoke_output):
    from rms_duck.bench.table import ISSUE_COLUMNS

    issue = _tables(smoke_output)[3]
    assert tuple(issue[0]) == ISSUE_COLUMNS and len(issue) == 2 + 8
    assert [row[2] for row in issue[2:]] == ["<= 2", "<= 1.3", "<= 1.3", "<= 5", "<= 1", "<= 1",
                                            "<= 2.5", "<= 1.3"]
    assert "rms_store / pack_context, GROUP BY" in issue[-1][0]
    assert any("estimate packer" in row[0] for row in issue[2:])
    # The SQL and stored rows carry the floors measured beside them (bench/handover.py).
    assert "floor: DuckDB's hand-over alone" in issue[2][4]
    assert "with no macro (a UDF on the list itself)" in issue[2][4]
    assert "floor: one INSERT of its inputs and receipt texts" in issue[4][4]
    # ... and the 10,000-candidate row the floor of checking its rows.
    assert "floor: checking the 200 dict rows alone" in issue[5][4]
    # performance.md's summary of where the targets stand lists every row, with its target.
    from pathlib import Path

    page = (Path(__file__).parents[1] / "docs" / "performance.md").read_text(encoding="utf-8")
    summary = page.split("## Where the issue-10 targets stand")[1].split("\n## ")[0]
    rows = [line for line in summary.splitlines() if line.startswith("| ")][1:]
    assert len(rows) == len(issue) - 2
    for doc_row, (name, _, target, *_) in zip(rows, issue[2:], strict=True):
        measure = name.split(", N=")[0].split(" of ")[0]
        assert doc_row.startswith(f"| {measure}") and f"| {target} |" in doc_row, doc_row

"""Bulk measurements for the speed bench: the token-count UDF against a raw loop, bulk
costing on one process against several, one statement packing thousands of bundles, and
that statement's peak memory against the Arrow size of its inputs.
"""

from __future__ import annotations

import gc
import json
import resource
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from ..candidates import to_candidates
from ..duck.connection import connect
from ..formats.base import clear_render_memos
from ..tokens.bulk import cost_lines, start_pool
from ..tokens.counter import clear_line_cache
from ..tokens.encodings import DEFAULT_ENCODING, get_encoding
from .workload import (
    BULK_CHECK_SQL,
    BULK_LISTS_SQL,
    BULK_PACK_SQL,
    BULK_SUMMARY_SQL,
    make_bulk_tables,
    make_rows,
    record_lines,
)

_CHECK_SAMPLE = 200


def measure_bulk(plan, *, log: Callable[[str], None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    log("token-count UDF against the raw loop")
    out["udf"] = udf_vs_loop(plan)
    log(f"bulk costing, {plan.processes} processes against 1")
    out["costing"] = costing_speedup(plan)
    log(f"bulk packing of {', '.join(f'{n:,}' for n in plan.bulk_bundles)} bundles")
    out["packing"] = bulk_packing(plan)
    log(f"peak memory of packing {plan.bulk_bundles[0]:,} bundles (fresh process)")
    out["memory"] = bulk_memory(plan)
    return out


def udf_vs_loop(plan) -> dict[str, Any]:
    """Throughput of SELECT sum(rms_token_count(content)) over the raw Python loop."""
    texts = [row["content"] for row in make_rows(plan.udf_texts, seed=plan.seed + 1,
                                                       text=plan.text)]
    encode = get_encoding(DEFAULT_ENCODING).encode_ordinary
    con = _connect()
    con.execute("CREATE TEMP TABLE bench_texts AS SELECT unnest(?::VARCHAR[]) AS content",
                [texts])
    sql = "SELECT sum(rms_token_count(content)) FROM bench_texts"
    ratios, loop_ms = [], []
    for _ in range(plan.repeats):
        t_loop, expected = _timed(_loop, encode, texts)
        t_udf, got = _timed(_scalar, con, sql)
        if got != expected:
            raise AssertionError(f"rms_token_count summed {got}, the loop {expected}")
        ratios.append(t_loop / t_udf)
        loop_ms.append(t_loop * 1_000)
    con.close()
    return {"texts": len(texts), "throughput_ratio": statistics.median(ratios),
            "loop_ms": statistics.median(loop_ms), "repeats": plan.repeats}


def costing_speedup(plan) -> dict[str, Any]:
    """bulk.cost_lines on `processes` processes against one, pool started beforehand."""
    lines = record_lines(to_candidates(make_rows(plan.costing_texts, seed=plan.seed + 2,
                                                     text=plan.text)))
    started, workers = _timed(start_pool, plan.processes)
    ratios, one_ms = [], []
    for _ in range(plan.repeats):
        t_one, expected = _timed(cost_lines, lines, processes=1)
        t_many, got = _timed(cost_lines, lines, processes=plan.processes, threshold_chars=0)
        if got != expected:
            raise AssertionError("bulk costing on several processes changed a count")
        ratios.append(t_one / t_many)
        one_ms.append(t_one * 1_000)
    return {"lines": len(lines), "processes": plan.processes, "workers": workers,
            "speedup": statistics.median(ratios), "one_process_ms": statistics.median(one_ms),
            "pool_start_ms": started * 1_000, "repeats": plan.repeats}


def bulk_packing(plan) -> dict[str, Any]:
    """One GROUP BY statement per size, cold caches each time; time ratio largest/smallest."""
    con = _connect()
    make_bulk_tables(con, bundles=max(plan.bulk_bundles), per_bundle=plan.per_bundle,
                     nodes=max(plan.bulk_bundles), seed=plan.seed, text=plan.text)
    times: dict[int, list[float]] = {n: [] for n in plan.bulk_bundles}
    for _ in range(plan.bulk_repeats):
        for n in plan.bulk_bundles:
            clear_line_cache()
            clear_render_memos()
            elapsed, (count, most) = _timed(_first_row, con, BULK_SUMMARY_SQL,
                                            [plan.bulk_budget, n])
            if count != n or most > plan.bulk_budget - 100:
                raise AssertionError(f"bulk pack returned {count} bundles, max {most} tokens")
            times[n].append(elapsed)
    checked = _check_sample(con, plan.bulk_budget)
    con.close()
    small, large = min(plan.bulk_bundles), max(plan.bulk_bundles)
    ratios = [b / a for a, b in zip(times[small], times[large], strict=False)]
    return {"bundles": list(plan.bulk_bundles), "per_bundle": plan.per_bundle,
            "budget": plan.bulk_budget, "seconds": {n: statistics.median(v) for n, v in
                                                    times.items()},
            "time_ratio": statistics.median(ratios), "size_ratio": large / small,
            "checked": checked, "repeats": plan.bulk_repeats}


def _check_sample(con, budget: int) -> int:
    """Recount a sample of bulk-packed bundles independently."""
    encode = get_encoding(DEFAULT_ENCODING).encode_ordinary
    rows = con.execute(BULK_CHECK_SQL, [budget, _CHECK_SAMPLE]).fetchall()
    for context, used in rows:
        if used != len(encode(context)) or used > budget - 100:
            raise AssertionError(f"bulk bundle broke the guarantee: {used} tokens_used")
    return len(rows)


def bulk_memory(plan) -> dict[str, Any]:
    """Peak RSS growth of one bulk statement, in a fresh process, against its input's size;
    and, in another fresh process, of the same GROUP BY without packing."""
    packed = _probe(plan, pack=True)
    lists = _probe(plan, pack=False)
    return {**packed, "group_by_only_mib": lists["peak_growth_mib"]}


def _probe(plan, *, pack: bool) -> dict[str, Any]:
    code = ("import json; from rms_duck.bench.bulkbench import memory_probe; "
            f"print(json.dumps(memory_probe({plan.bulk_bundles[0]}, {plan.per_bundle}, "
            f"{plan.bulk_budget}, {plan.seed}, pack={pack}, text={plan.text!r})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def memory_probe(bundles: int, per_bundle: int, budget: int, seed: int, *,
                 pack: bool = True, text: str = "notes") -> dict[str, Any]:
    """In this (fresh) process: build the inputs in DuckDB, then measure one statement,
    its results read as a stream of Arrow batches and dropped."""
    con = _connect()
    make_bulk_tables(con, bundles=bundles, per_bundle=per_bundle, nodes=bundles, seed=seed,
                     text=text)
    # Load the encoding and run every code path once, so the baseline includes them.
    con.execute(BULK_SUMMARY_SQL, [budget, 1]).fetchall()
    gc.collect()
    before, peak_before = _rss(), _max_rss()
    if pack:
        reader = con.sql(BULK_PACK_SQL, params=[budget, bundles]).to_arrow_reader(2_048)
    else:
        reader = con.sql(BULK_LISTS_SQL, params=[bundles]).to_arrow_reader(2_048)
    rows = sum(batch.num_rows for batch in reader)
    peak = _max_rss()
    arrow = con.sql("SELECT id, score, content, event_time, speaker FROM bench_candidates"
                    ).to_arrow_table().nbytes
    growth = peak - before
    out = {"bundles": rows, "candidates": bundles * per_bundle, "arrow_input_mib":
           arrow / 2**20, "peak_growth_mib": growth / 2**20, "ratio": growth / arrow,
           "hidden_below_mib": max(0, peak_before - before) / 2**20}
    if pack:  # once more, cold, for the packer's own share: the Python heap (tracemalloc)
        clear_line_cache()
        clear_render_memos()
        gc.collect()
        tracemalloc.start()
        reader = con.sql(BULK_PACK_SQL, params=[budget, bundles]).to_arrow_reader(2_048)
        sum(batch.num_rows for batch in reader)
        out["python_peak_mib"] = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return out


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def _max_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _connect():
    con = connect()
    con.execute("SET enable_progress_bar = false")
    return con


def _timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - start, value


def _loop(encode, texts: list[str]) -> int:
    return sum(len(encode(text)) for text in texts)


def _first_row(con, sql: str, params: list[Any] | None = None) -> tuple[Any, ...]:
    return con.execute(sql, params or []).fetchall()[0]


def _scalar(con, sql: str) -> Any:
    return _first_row(con, sql)[0]

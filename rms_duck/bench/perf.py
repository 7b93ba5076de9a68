"""`rms-duck bench`: packing speed as ratios of runs measured side by side, in one process.

Absolute times depend on the machine and on whatever else it runs; ratios of paired runs
(each repetition measures every variant back to back, and the table shows the median of
the per-repetition ratios) carry over much better. Per (candidates N, budget) row:

  (a) a plain encode_ordinary loop over the N candidates' rendered record lines;
  (b) pack_candidates() cold: line-cost cache and render memo emptied first;
  (c) pack_candidates() warm: the same pack again;
  (d) one exact count of the packed output;
  (e) the RFC-literal reference packer (workload.rfc_literal_pack), which re-renders and
      re-counts the whole context for every candidate it tries.

Every pack is checked: tokens_used equals an independent recount, fits the budget, and the
warm pack gives the cold pack's exact bytes. Bulk measurements (bulkbench.py) follow.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import os
import platform
import pstats
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import pyarrow as pa

from ..candidates import to_candidates
from ..config import PackingConfig
from ..formats.base import clear_render_memos
from ..packing.pipeline import pack_candidates
from ..tokens.counter import clear_line_cache
from ..tokens.encodings import DEFAULT_ENCODING, get_encoding
from . import bulkbench, targets
from .workload import make_rows, record_lines, rfc_literal_pack


@dataclass(frozen=True, slots=True)
class Plan:
    """What one bench run measures, and how often."""

    sizes: tuple[int, ...] = (100, 1_000, 10_000)
    budgets: tuple[int, ...] = (2_048, 4_096, 8_192, 32_768, 131_072)
    repeats: int = 5
    e_cap: float = 20.0
    bulk_bundles: tuple[int, ...] = (10_000, 20_000)
    bulk_repeats: int = 1
    per_bundle: int = 8
    bulk_budget: int = 512
    udf_texts: int = 20_000
    costing_texts: int = 20_000
    processes: int = 2
    seed: int = 0
    # Issue 10's target rows (targets.py).
    target_sql_n: int = 1_000
    target_large_n: int = 10_000
    target_estimate_ns: tuple[int, ...] = (600, 10_000)
    target_bulk_bundles: int = 5_000
    only_targets: bool = False
    clock: str = "wall"  # the target rows' clock: "wall" or "cpu" (targets.py)
    text: str = "notes"  # the candidates' texts: "notes" or "dialogue" (workload.TEXTS)

    def reps(self, n: int) -> int:
        """Fewer repetitions for the largest pools, where one run already takes a while."""
        return max(1, self.repeats // 2) if n >= 10_000 else self.repeats

    def e_reps(self, n: int, budget: int) -> int:
        """(e) is quadratic: one run where it takes seconds."""
        return self.reps(n) if n * budget <= 1_000 * 4_096 else 1

    def e_seconds(self, n: int) -> float:
        """(e)'s time cap; a third of it for the largest pools, where it always hits it."""
        return self.e_cap if n < 10_000 else self.e_cap / 3


FULL = Plan()
SMOKE = Plan(sizes=(20, 60), budgets=(512, 2_048), repeats=2, e_cap=2.0, bulk_bundles=(30, 60),
             per_bundle=4, udf_texts=200, costing_texts=400, target_sql_n=60,
             target_large_n=200, target_estimate_ns=(30, 60), target_bulk_bundles=30)


@dataclass(slots=True)
class Report:
    plan: Plan
    machine: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)
    bulk: dict[str, Any] = field(default_factory=dict)
    targets: list[dict[str, Any]] = field(default_factory=list)
    profile: str | None = None


def measure(plan: Plan, *, profile: bool = False, log: Callable[[str], None] = lambda s: None
            ) -> Report:
    """Run every measurement of `plan` and return the figures (format with render_report)."""
    report = Report(plan, machine_info())
    enc = get_encoding(DEFAULT_ENCODING)
    pool_rows = make_rows(max(*plan.sizes, plan.target_sql_n, plan.target_large_n,
                              *plan.target_estimate_ns), seed=plan.seed, text=plan.text)
    report.targets = targets.measure_targets(plan, pool_rows, log=log)
    for n in () if plan.only_targets else plan.sizes:
        rows = pool_rows[:n]
        lines = record_lines(to_candidates(rows))
        arrow_bytes = pa.Table.from_pylist(rows).nbytes
        for budget in plan.budgets:
            log(f"packing N={n:,} budget={budget:,}")
            row = measure_row(rows, lines, budget, plan, enc)
            row["peak_mib"], row["peak_x_arrow"] = _peak(rows, budget, arrow_bytes)
            report.rows.append(row)
    if not plan.only_targets:
        report.bulk = bulkbench.measure_bulk(plan, log=log)
    if profile:
        report.profile = profile_pack(pool_rows[:1_000], 4_096)
    report.machine["load_after"] = _load()
    return report


def measure_row(rows: list[dict[str, Any]], lines: Sequence[str], budget: int, plan: Plan,
                enc) -> dict[str, Any]:
    """Paired repetitions of (a)-(e) for one pool and budget."""
    n = len(rows)
    candidates = to_candidates(rows)
    ratios: dict[str, list[float]] = {"b/a": [], "c/d": [], "e/b": [], "e/c": []}
    times: dict[str, list[float]] = {"a": [], "b": [], "c": [], "d": [], "e": []}
    e_capped = False
    for rep in range(plan.reps(n)):
        with_e = rep < plan.e_reps(n, budget) and not e_capped
        t, bundle, e_used = _repetition(rows, candidates, lines, budget, plan, enc, with_e)
        e_capped = e_capped or (with_e and e_used is None)
        for key, value in t.items():
            times[key].append(value)
        ratios["b/a"].append(t["b"] / t["a"])
        ratios["c/d"].append(t["c"] / t["d"])
        if "e" in t:
            ratios["e/b"].append(t["e"] / t["b"])
            ratios["e/c"].append(t["e"] / t["c"])
    return {
        "n": n, "budget": budget, "repeats": plan.reps(n), "e_runs": len(times["e"]),
        "e_capped": e_capped, "packed": len(bundle.included), "tokens_used": bundle.tokens_used,
        "ms": {k: _median(v) * 1_000 for k, v in times.items() if v},
        "ratios": {k: _median(v) for k, v in ratios.items() if v},
    }


def _repetition(rows, candidates, lines, budget: int, plan: Plan, enc, with_e: bool):
    """One back-to-back run of (a), (b), (c), (d) and, when asked, (e)."""
    config = PackingConfig()
    encode = enc.encode_ordinary
    t: dict[str, float] = {}
    t["a"] = _timed(_loop, encode, lines)[0]
    _cold()
    t["b"], bundle = _timed(pack_candidates, rows, budget=budget, config=config)
    t["c"], warm = _timed(pack_candidates, rows, budget=budget, config=config)
    t["d"] = _timed(encode, bundle.context)[0]
    _check(bundle, warm, enc, budget - config.overhead_tokens)
    used = None
    if with_e:
        t["e"], used = _timed(rfc_literal_pack, candidates, budget=budget,
                              overhead=config.overhead_tokens, count=_counter(encode),
                              deadline=time.perf_counter() + plan.e_seconds(len(rows)))
    return t, bundle, used


def _loop(encode, lines: Sequence[str]) -> int:
    """(a): the plain loop, each line with its newline as the packer counts it."""
    return sum(len(encode(line + "\n")) for line in lines)


def _counter(encode) -> Callable[[str], int]:
    def count(text: str) -> int:
        return len(encode(text))

    return count


def _cold() -> None:
    clear_line_cache()
    clear_render_memos()


def _timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return time.perf_counter() - start, value


def _median(values: Sequence[float]) -> float:
    return statistics.median(values)


def _check(cold, warm, enc, available: int) -> None:
    """The exactness guarantee, on every measured pack."""
    recount = len(enc.encode_ordinary(cold.context))
    if cold.tokens_used != recount or cold.tokens_used > available:
        raise AssertionError(f"pack broke the guarantee: tokens_used {cold.tokens_used}, "
                             f"recount {recount}, available {available}")
    if warm.context != cold.context or warm.receipt != cold.receipt:
        raise AssertionError("the warm (cached) pack differs from the cold one")


def _peak(rows: list[dict[str, Any]], budget: int, arrow_bytes: int) -> tuple[float, float]:
    """Python heap peak of one cold pack (tracemalloc; untimed, it slows Python down)."""
    _cold()
    tracemalloc.start()
    try:
        pack_candidates(rows, budget=budget)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return peak / 2**20, peak / arrow_bytes


def profile_pack(rows: list[dict[str, Any]], budget: int, top: int = 18) -> str:
    """cProfile of a cold then a warm pack, by cumulative time: where the time goes."""
    pack_candidates(rows, budget=budget)  # load the encoding, compile regexes: not the pack
    out = io.StringIO()
    for label in ("cold", "warm"):
        if label == "cold":
            _cold()
        profiler = cProfile.Profile()
        profiler.enable()
        pack_candidates(rows, budget=budget)
        profiler.disable()
        out.write(f"\n{label} pack, N={len(rows):,}, budget={budget:,}:\n")
        pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(top)
    return out.getvalue()


def machine_info() -> dict[str, Any]:
    import duckdb
    import tiktoken

    return {
        "cores": os.cpu_count(), "python": platform.python_version(),
        "tiktoken": tiktoken.__version__, "duckdb": duckdb.__version__,
        "platform": platform.platform(terse=True), "load_before": _load(),
    }


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def plan_from_args(args: argparse.Namespace) -> Plan:
    plan = SMOKE if getattr(args, "smoke", False) else FULL
    changes = {name: getattr(args, attr) for name, attr in (
        ("sizes", "sizes"), ("budgets", "budgets"), ("repeats", "repeats"), ("e_cap", "e_cap"),
        ("bulk_bundles", "bulk"), ("processes", "processes"), ("seed", "seed"),
        ("only_targets", "only_targets"), ("clock", "clock"), ("text", "text"))
        if getattr(args, attr, None) is not None}
    return replace(plan, **changes)


def run(args: argparse.Namespace) -> int:
    from .table import render_report

    plan = plan_from_args(args)
    started = time.perf_counter()
    report = measure(plan, profile=getattr(args, "profile", False),
                     log=lambda s: print(f"... {s}", file=sys.stderr, flush=True))
    report.machine["bench_seconds"] = round(time.perf_counter() - started, 1)
    print(render_report(report))
    if getattr(args, "json", None):
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({**asdict(report), "plan": asdict(plan)}, f, indent=2, default=str)
    return 0

"""`rms-duck bench --dask`: the same bundles from one DuckDB GROUP BY, and from
rms_duck.dask.pack_groups on a LocalCluster of 1 and of 2 worker processes.

Each repetition runs the three back to back, cold (line caches and render memos emptied
in this process and on every worker; encodings already loaded), and checks that every
group's context is byte-equal across them. The table shows median seconds and the
medians of the per-repetition ratios. Workers are processes with one thread each: the
packer is pure Python and holds the GIL.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

from ..duck.connection import connect
from ..errors import MissingExtraError
from ..formats.base import clear_render_memos
from ..tokens.counter import clear_line_cache
from .workload import BULK_PACK_SQL, make_bulk_tables


@dataclass(frozen=True, slots=True)
class DaskPlan:
    groups: int = 2_000
    per_bundle: int = 8
    budget: int = 512
    partitions: int = 8
    workers: tuple[int, ...] = (1, 2)
    repeats: int = 3
    seed: int = 0


FULL = DaskPlan()
SMOKE = DaskPlan(groups=200, partitions=4, repeats=1)


def measure(plan: DaskPlan, *, log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    from ..dask import _imports, pack_groups

    dd, _ = _imports()  # a MissingExtraError naming the extra when dask is not installed
    try:
        import distributed
    except ImportError as exc:
        raise MissingExtraError(
            f"rms-duck bench --dask needs dask.distributed ({exc}); install it with "
            "pip install 'rms-duck[dask]'") from None

    logging.getLogger("distributed").setLevel(logging.ERROR)  # shuffle notices per run
    con = connect()
    con.execute("SET enable_progress_bar = false")
    make_bulk_tables(con, bundles=plan.groups, per_bundle=plan.per_bundle, nodes=plan.groups,
                     seed=plan.seed)
    frame = con.sql("SELECT q, id, score, content, event_time, speaker FROM bench_candidates "
                    "WHERE q < ?", params=[plan.groups]).df()
    sql = f"SELECT q, bundle.context FROM ({BULK_PACK_SQL}) ORDER BY q"
    clusters = {}
    times: dict[str, list[float]] = {"duckdb": [], **{f"dask{n}": [] for n in plan.workers}}
    cpu: dict[str, list[float]] = {name: [] for name in times}
    try:
        for n in plan.workers:
            log(f"starting a LocalCluster of {n} worker process(es)")
            cluster = distributed.LocalCluster(n_workers=n, threads_per_worker=1,
                                               processes=True, dashboard_address=":0")
            clusters[n] = (cluster, distributed.Client(cluster))
            clusters[n][1].run(_warm)
        for rep in range(plan.repeats):
            log(f"repetition {rep + 1} of {plan.repeats}: {plan.groups:,} groups")
            _cold()
            (elapsed, expected), used = _cpu_used(lambda: _timed(lambda: con.execute(
                sql, [plan.budget, plan.groups]).fetchall()))
            times["duckdb"].append(elapsed)
            cpu["duckdb"].append(used)
            for n, (_, client) in clusters.items():
                client.run(_cold)
                with client.as_current():
                    (elapsed, result), used = _cpu_used(lambda: _timed(lambda: pack_groups(
                        dd.from_pandas(frame, npartitions=plan.partitions), by="q",
                        budget=plan.budget).compute()))
                cpu[f"dask{n}"].append(used)
                got = list(zip(result["q"].tolist(), result["context"].tolist(), strict=True))
                if got != [tuple(row) for row in expected]:
                    raise AssertionError(f"{n} Dask worker(s) packed other bytes than DuckDB")
                times[f"dask{n}"].append(elapsed)
        log("storing the bundles of the last cluster in one store")
        store = _store(plan, clusters[plan.workers[-1]][1], frame)
    finally:
        for cluster, client in clusters.values():
            client.close()
            cluster.close()
        con.close()
    return {**_figures(plan, times, cpu), "store": store}


def _store(plan: DaskPlan, client, frame) -> dict[str, Any]:
    """store_batches() of the cluster's bundles (packed with inputs) into a fresh store:
    the serial step whose rate bounds what one store takes in from a cluster."""
    import dask.dataframe as dd

    from ..audit.verify import verify_receipts
    from ..dask import pack_groups
    from ..duck.batchstore import store_batches

    with client.as_current():
        packed = pack_groups(dd.from_pandas(frame, npartitions=plan.partitions), by="q",
                             budget=plan.budget, inputs=True).compute()
    store = connect()
    try:
        elapsed, stored = _timed(lambda: store_batches(store, packed))
        problems = verify_receipts(store)
    finally:
        store.close()
    if problems or stored.num_rows != plan.groups:
        raise AssertionError(f"stored {stored.num_rows} bundles, {len(problems)} problems")
    return {"bundles": stored.num_rows, "seconds": elapsed,
            "bundles_per_second": stored.num_rows / elapsed, "verified": True}


def _figures(plan: DaskPlan, times: dict[str, list[float]],
             cpu: dict[str, list[float]]) -> dict[str, Any]:
    def ratio(a: str, b: str) -> float:
        return statistics.median(x / y for x, y in zip(times[a], times[b], strict=True))

    one, two = (f"dask{n}" for n in plan.workers[:2])
    return {"plan": asdict(plan), "seconds": {k: statistics.median(v) for k, v in times.items()},
            "runs": times, "cpu_seconds": {k: statistics.median(v) for k, v in cpu.items()},
            "cores_busy": {k: statistics.median(c / t for c, t in zip(cpu[k], times[k],
                                                                        strict=True))
                           for k in times},
            "speedup_2_vs_1": ratio(one, two),
            "duckdb_vs_dask2": ratio("duckdb", two), "duckdb_vs_dask1": ratio("duckdb", one),
            "load": _load(), "identical": True}


def render(figures: dict[str, Any]) -> str:
    p, s = figures["plan"], figures["seconds"]
    c, busy = figures["cpu_seconds"], figures["cores_busy"]
    rows = [("one DuckDB GROUP BY (this process)", "duckdb")]
    rows += [(f"pack_groups, {n} Dask worker(s)", f"dask{n}") for n in p["workers"]]
    lines = [
        f"rms_duck Dask bench: {p['groups']:,} groups x {p['per_bundle']} candidates, budget "
        f"{p['budget']}, {p['partitions']} partitions, {p['repeats']} repetition(s); load "
        f"average {figures['load']}. Every group's context was byte-equal in all three.",
        "",
        "| run | median s | DuckDB s / this s | CPU s (all processes) | cores busy |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [f"| {name} | {s[k]:.2f} | {s['duckdb'] / s[k]:.2f} | {c[k]:.2f} | {busy[k]:.2f} |"
              for name, k in rows]
    lines += ["", f"2 workers vs 1 (median of paired ratios): {figures['speedup_2_vs_1']:.2f}x; "
              f"one DuckDB GROUP BY / 2 workers: {figures['duckdb_vs_dask2']:.2f}x. CPU s: "
              "this process and all its child processes (cluster, workers, costing pool); "
              "cores busy: CPU s / wall s, the share of the machine the run got."]
    store = figures.get("store")
    if store:
        lines.append(f"store_batches of those {store['bundles']:,} bundles into one store: "
                     f"{store['seconds']:.2f} s ({store['bundles_per_second']:,.0f} bundles/s), "
                     "verify_receipts clean.")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    plan = SMOKE if getattr(args, "smoke", False) else FULL
    changes = {k: v for k, v in (("groups", getattr(args, "groups", None)),
                                 ("repeats", getattr(args, "repeats", None)),
                                 ("seed", getattr(args, "seed", None))) if v is not None}
    plan = replace(plan, **changes)
    figures = measure(plan, log=lambda s: print(f"... {s}", file=sys.stderr, flush=True))
    print(render(figures))
    if getattr(args, "json", None):
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(figures, f, indent=2)
    return 0


def _warm() -> None:
    """On each worker (and here): load the encoding and the packing modules once, outside
    the timings, as a long-running cluster would have."""
    from ..packing import batches  # noqa: F401
    from ..tokens.encodings import DEFAULT_ENCODING, get_encoding

    get_encoding(DEFAULT_ENCODING)


def _cold() -> None:
    clear_line_cache()
    clear_render_memos()


def _cpu_used(fn: Callable[[], Any]) -> tuple[Any, float]:
    """fn()'s value, and the CPU seconds this process and its live children used meanwhile."""
    before = _cpu_seconds()
    value = fn()
    return value, _cpu_seconds() - before


def _cpu_seconds() -> float:
    import psutil  # a dependency of distributed

    me = psutil.Process()
    total = 0.0
    for proc in [me, *me.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.Error:
            continue  # exited meanwhile
        total += times.user + times.system
    return total


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def _load() -> float | None:
    try:
        import os

        return round(os.getloadavg()[0], 2)
    except OSError:
        return None

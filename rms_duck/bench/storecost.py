"""`rms-duck bench --store-cost N`: per-pack store time with 0 and with N stored receipts.

Fills one database with N receipts (and 20 line costs each) through the same store path a
pack takes, one transaction per receipt as packs arrive. Then it packs the same candidates
into it and into an empty database, alternating which goes first, and prints the median of
the paired ratios: with a flat store cost it stays near 1. Pairing in one process keeps the
machine's noise and the process's own age out of the ratio. Not a test: no time is asserted.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time

import pyarrow as pa

import rms_duck
from rms_duck.candidates import to_candidates
from rms_duck.duck.linecosts import store_line_costs
from rms_duck.duck.storage import store_bundle

_ROUNDS = 60


def _rows(tag: str, i: int) -> pa.Table:
    return pa.Table.from_pylist([
        {"id": f"{tag}{i}-{j}", "score": 0.5,
         "content": f"pack {tag} {i} record {j} " + "lorem ipsum " * 15} for j in range(20)])


def _fill(con, n: int) -> float:
    """Store n receipts and 20 line costs each, one store at a time; seconds taken."""
    filler = rms_duck.pack(con, _rows("filler", 0), budget=1000, store=False)
    candidates = to_candidates(_rows("filler", 0).to_pylist())
    start = time.perf_counter()
    for i in range(n):
        store_bundle(con, filler, candidates, namespace="filler")
        store_line_costs(con, {f"filler {i} line {j}": 5 for j in range(20)},
                         encoding=filler.config.encoding)
    return time.perf_counter() - start


def _timed_pack(con, rows: pa.Table) -> float:
    start = time.perf_counter()
    rms_duck.pack(con, rows, budget=1000)
    return (time.perf_counter() - start) * 1000


def run(args: argparse.Namespace) -> int:
    n = args.store_cost
    with tempfile.TemporaryDirectory() as tmp:
        # Both databases of the same kind: two files under --db's folder, or two in memory.
        paths = ((os.path.join(tmp, "empty.duckdb"), args.db) if args.db
                 else (":memory:", ":memory:"))
        empty, full = rms_duck.connect(paths[0]), rms_duck.connect(paths[1])
        filled = _fill(full, n)
        for con in (empty, full):
            for i in range(5):
                rms_duck.pack(con, _rows("warm", i), budget=1000)
        times: dict[str, list[float]] = {"empty": [], "full": []}
        for i in range(_ROUNDS):
            order = (("empty", empty), ("full", full))
            for name, con in order if i % 2 == 0 else order[::-1]:
                times[name].append(_timed_pack(con, _rows("round", i)))
        empty.close()
        full.close()
    ratio = statistics.median(f / e for e, f in zip(times["empty"], times["full"], strict=True))
    print(f"filled {n} receipts and {n * 20} line costs, one store at a time, in {filled:.1f} s")
    print(f"per-pack store, median of {_ROUNDS} paired packs: "
          f"{statistics.median(times['empty']):.1f} ms with 0 receipts, "
          f"{statistics.median(times['full']):.1f} ms with {n} (paired ratio {ratio:.2f})")
    return 0

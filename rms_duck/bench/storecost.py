"""`rms-duck bench --store-cost N`: per-pack store time with ~0 and with N stored receipts.

Fills N receipts (and 20 line costs each) by SQL, then times 40 stored packs before and
after and prints the ratio; with a flat store cost it stays near 1. Not a test: no time is
asserted.
"""

from __future__ import annotations

import argparse
import time

import pyarrow as pa

import rms_duck


def run(args: argparse.Namespace) -> int:
    n = args.store_cost
    con = rms_duck.connect(args.db or ":memory:")

    def packs(tag: str, count: int = 40) -> float:
        start = time.perf_counter()
        for i in range(count):
            rows = [{"id": f"{tag}{i}-{j}", "score": 0.5,
                     "content": f"pack {tag} {i} record {j} " + "lorem ipsum " * 15}
                    for j in range(20)]
            rms_duck.pack(con, pa.Table.from_pylist(rows), budget=1000)
        return (time.perf_counter() - start) / count * 1000

    packs("warm", 5)
    before = packs("a")
    con.execute("INSERT INTO rms_bundles SELECT uuid() AS bundle_id, b.* EXCLUDE (bundle_id) "
                "FROM (SELECT * FROM rms_bundles LIMIT 1) b, range(?) t(i)", [n])
    con.execute("INSERT INTO rms_receipts SELECT uuid(), uuid(), r.created_at, 'filler', i + 1, "
                "NULL, r.receipt_version, r.receipt, sha256(i::VARCHAR), r.context_sha256 "
                "FROM (SELECT * FROM rms_receipts LIMIT 1) r, range(?) t(i)", [n])
    con.execute("INSERT INTO rms_line_costs SELECT 'x', sha256(i::VARCHAR), 5 FROM range(?) t(i)",
                [n * 20])
    after = packs("b")
    print(f"per-pack store: {before:.1f} ms at ~0 receipts, {after:.1f} ms at {n} receipts "
          f"(ratio {after / before:.2f})")
    return 0

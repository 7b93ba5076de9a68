"""Per-pack store time with ~0 and with N stored receipts (adversarial review M6).

Usage: python benchmarks/store_cost.py [N] [DB]   (default 10000, in memory)
Fills N receipts (and 20 line costs each) by SQL, then times 40 packs before and after and
prints the ratio; with a flat store cost it stays near 1. Not a test: no time is asserted.
"""

import sys
import time

import pyarrow as pa

import rms_duck


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    con = rms_duck.connect(sys.argv[2] if len(sys.argv) > 2 else ":memory:")

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


if __name__ == "__main__":
    main()

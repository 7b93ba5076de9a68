# Made with rms_duck at commit 1ec5b60 (receipt_version 3: conflict lines priced without
# their pair labels):
#   PYTHONPATH=<checkout at 1ec5b60> python tests/data/receipts_v3_conflicts/make.py \
#       tests/data/receipts_v3_conflicts
# Conflicting records in the three formats, some with a counterpart that did not fit, at
# budgets where pricing without the labels made assembly drop a record (NOTHING_FIT at 72
# tokens, where 60 packed one), and adjacent session packing, which version 3 left in
# packing order, so replay must rebuild exactly those bytes and decisions.
import sys

import pyarrow as pa

import rms_duck

out = sys.argv[1]
con = rms_duck.connect()


def table(rows, namespace):
    # Every key of every row: pa.Table.from_pylist takes its columns from the first row.
    keys = sorted({key for row in rows for key in row} | {"namespace_id"})
    return pa.Table.from_pylist([{k: {**r, "namespace_id": namespace}.get(k) for k in keys}
                                 for r in rows])


short = [
    {"id": "a", "score": 0.9, "content": "Storage costs 2,300 EUR a month.", "contradicts": ["b"]},
    {"id": "b", "score": 0.8, "content": "Storage costs 3,100 EUR a month."},
    {"id": "c", "score": 0.5, "content": "Jonas owns the egress rules."},
]
long_b = [dict(short[0]), {"id": "b", "score": 0.8,
                           "content": "Storage costs 3,100 EUR a month. " * 40}]
tight = {"overhead_tokens": 0}
for namespace, rows, budget, config in (
        (None, short, 72, tight), (None, short, 88, tight), ("v3", short, 88, tight),
        ("v3", short, 102, tight), ("v3", long_b, 400, {}),
        ("v3", long_b, 400, {"context_format": "compact"}),
        ("v3", long_b, 300, {"context_format": "auditable"}),
        ("v3", short, 269, {"context_format": "compact"})):
    rms_duck.pack(con, table(rows, namespace), budget=budget, config=config, session_id="v3")
# Adjacent session packing: version 3 left every section in packing order.
session = [
    {"id": "t", "score": 0.9, "content": "We agreed to move the cut-over.",
     "paths": ["LEXICAL", "VECTOR"], "session_id": "s", "session_position": 5},
    {"id": "n", "score": 0.3, "content": "Sounds good.", "paths": ["SESSION_CONTEXT"],
     "session_id": "s", "session_position": 6},
    {"id": "f1", "score": 0.8, "type": "fact", "confidence": 0.9, "content": "Cut-over set.",
     "event_time": "2026-11-03T10:00:00Z"},
    {"id": "f2", "score": 0.7, "type": "fact", "confidence": 0.9, "content": "Plan drafted.",
     "event_time": "2025-01-05T10:00:00Z"},
    {"id": "f3", "score": 0.6, "type": "fact", "confidence": 0.9, "content": "Budget approved.",
     "event_time": "2026-11-03T08:00:00Z"},
    {"id": "f4", "score": 0.5, "type": "fact", "confidence": 0.9, "content": "Jonas owns egress."},
]
for budget in (4000, 217):
    rms_duck.pack(con, table(session, "adj"), budget=budget,
                  config={"session_context_packing": "adjacent"}, session_id="v3")
assert rms_duck.verify_receipts(con) == []
for table in ("rms_nodes", "rms_bundles", "rms_receipts"):
    con.execute(f"COPY {table} TO '{out}/{table}.json' (FORMAT json)")

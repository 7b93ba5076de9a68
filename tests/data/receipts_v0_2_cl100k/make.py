# Made with rms_duck at commit e787990 (default cl100k_base, receipts without config.model):
#   PYTHONPATH=<export of e787990> RMS_DUCK_BPE_DIR=<cl100k file dir> python make.py OUT
import sys

import rms_duck

out = sys.argv[1]
con = rms_duck.connect()
con.execute("INSERT INTO rms_nodes (id, namespace_id, content, prose) SELECT "
            "uuid_extract_version(gen_random_uuid()) * 0 + 0, 'old', 'x', 'y' WHERE false")
for i in range(8):
    con.execute("INSERT INTO rms_nodes (id, namespace_id, content, prose, salience) VALUES "
                "(?, 'old', ?, ?, ?)",
                [f"00000000-0000-4000-8000-00000000000{i}", f"Note {i}: Maya moved to Lisbon in "
                 f"202{i} 🙂 naïve café", f"Maya moved ({i}).", 1 - i / 10])
ranking = "SELECT *, salience AS score FROM rms_nodes ORDER BY score DESC"
for fmt, budget in (("reader", 220), ("auditable", 330), ("compact", 250)):
    rms_duck.pack(con, ranking, budget=budget, config={"context_format": fmt}, session_id="old")
assert rms_duck.verify_receipts(con) == []
for table in ("rms_nodes", "rms_bundles", "rms_receipts"):
    con.execute(f"COPY {table} TO '{out}/{table}.json' (FORMAT json)")

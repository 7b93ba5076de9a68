# Made with rms_duck at commit 1a17f62 (receipt_version 5), with the subclasses of
# tests/reader_subclasses.py registered:
#   PYTHONPATH=<checkout of 1a17f62> python tests/data/receipts_v5_custom_readers/make.py \
#       tests/data/receipts_v5_custom_readers
# One pack per subclass; the render memos are cleared before each, because at that commit a
# subclass that inherited record_line shared the reader's memo (a quiet-speakers pack after
# a reader pack got the reader's line with its speaker).
import sys
from pathlib import Path

import rms_duck
from rms_duck.formats.base import clear_render_memos

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import reader_subclasses  # noqa: E402

reader_subclasses.register_all()
out = sys.argv[1]
con = rms_duck.connect()
con.execute("INSERT INTO rms_nodes (id, namespace_id, content, speaker, event_time, salience)"
            " VALUES ('00000000-0000-4000-8000-000000000001', 'ns', 'Back at work.', 'Sophie',"
            " '2024-01-03 09:05:00+00', 0.9), ('00000000-0000-4000-8000-000000000002', 'ns',"
            " 'Lunch with Maya.', 'Sophie', '2024-02-07 10:00:00+00', 0.8)")
for cls in reader_subclasses.SUBCLASSES:
    clear_render_memos()
    rms_duck.pack(con, "SELECT *, salience AS score FROM rms_nodes", budget=300,
                  config={"context_format": cls.name}, session_id="v5")
assert rms_duck.verify_receipts(con) == []
for table in ("rms_nodes", "rms_edges", "rms_bundles", "rms_receipts"):
    con.execute(f"COPY {table} TO '{out}/{table}.json' (FORMAT json)")

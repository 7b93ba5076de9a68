# Made with rms_duck at commit c162b22 (receipt_version 2: reader day lines 'YYYY-MM-DD'):
#   python tests/data/receipts_v2_reader_dates/make.py tests/data/receipts_v2_reader_dates
# Dated, multi-speaker turns across two years, some sharing a session time, packed in the
# reader format with and without citations and with temporal guidance (which names the date
# lines), so replay must rebuild every day and time line.
import sys

import rms_duck

out = sys.argv[1]
con = rms_duck.connect()
turns = [
    ("2023-12-27 12:17:00+00", "Sophie", "We adopted a dachshund from the rescue centre."),
    ("2023-12-27 12:17:00+00", "Caroline", "What did you name it?"),
    ("2023-12-27 12:22:00+00", "Sophie", "Janne. The kids picked it."),
    ("2023-12-28 00:00:00+00", "Caroline", "Midnight note: the trail race raised 800 pounds."),
    ("2024-01-03 09:05:30+00", "Sophie", "Back at work at Rosemann Salz AG today."),
    ("2024-01-03 09:05:30+00", "Caroline", "Good luck with the big client project!"),
    ("2024-02-14 15:09:00+00", "Sophie", "Tried chess a week ago, it was fun."),
    (None, "Sophie", "I am allergic to peanuts."),
]
for i, (when, speaker, text) in enumerate(turns):
    con.execute("INSERT INTO rms_nodes (id, namespace_id, content, speaker, event_time, salience)"
                " VALUES (?, 'dated', ?, ?, ?, ?)",
                [f"00000000-0000-4000-8000-0000000000{i:02d}", text, speaker, when, 1 - i / 20])
ranking = "SELECT *, salience AS score FROM rms_nodes ORDER BY score DESC"
question = {"query": "When did Sophie adopt the dog?", "reference_time": "2024-03-01T00:00:00Z"}
for config, budget in (({}, 400), ({"context_citations": True}, 400), ({}, 190),
                       (question, 400)):
    rms_duck.pack(con, ranking, budget=budget, config=config, session_id="v2")
assert rms_duck.verify_receipts(con) == []
for table in ("rms_nodes", "rms_bundles", "rms_receipts"):
    con.execute(f"COPY {table} TO '{out}/{table}.json' (FORMAT json)")

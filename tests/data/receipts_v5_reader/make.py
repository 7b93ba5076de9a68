# Made with rms_duck at commit 1a17f62 (receipt_version 5: the reader format of "- " record
# lines, "[...]" section labels and a "[metadata]" line in words, and time lines only where
# a day has two times), with the last pack at 140 tokens so that it shows a [summary]:
#   python tests/data/receipts_v5_reader/make.py tests/data/receipts_v5_reader
# Dated, multi-speaker turns across two years (one day with two session times, others with
# one), a stored summary, a conflicting pair and an undated record, packed in the reader
# format with and without citations, with temporal guidance, tight, and in compact, so
# replay must rebuild every header, date and metadata line of that version.
import sys

import rms_duck

out = sys.argv[1]
con = rms_duck.connect()
turns = [
    ("2023-12-27 12:17:00+00", "Sophie", "We adopted a dachshund from the rescue centre.", None),
    ("2023-12-27 12:17:00+00", "Caroline", "What did you name it?", None),
    ("2023-12-27 18:40:00+00", "Sophie", "Janne. The kids picked it.", None),
    ("2024-01-03 09:05:30+00", "Sophie", "Back at work at Rosemann Salz AG today.", None),
    ("2024-01-03 09:05:30+00", "Caroline", "Good luck with the big client project!", None),
    ("2024-02-14 15:09:00+00", "Sophie", "Tried chess a week ago, it was fun. " * 6,
     "Sophie tried chess."),
    (None, "Sophie", "I am allergic to peanuts.", None),
]
for i, (when, speaker, text, prose) in enumerate(turns):
    con.execute("INSERT INTO rms_nodes (id, namespace_id, content, speaker, event_time, salience,"
                " prose) VALUES (?, 'dated', ?, ?, ?, ?, ?)",
                [f"00000000-0000-4000-8000-0000000000{i:02d}", text, speaker, when, 1 - i / 20,
                 prose])
con.execute("INSERT INTO rms_nodes (id, namespace_id, content, salience) VALUES"
            " ('00000000-0000-4000-8000-000000000090', 'dated', 'The race raised 800 pounds.',"
            " 0.5), ('00000000-0000-4000-8000-000000000091', 'dated',"
            " 'The race raised 600 pounds.', 0.4)")
con.execute("INSERT INTO rms_edges (source_id, target_id, kind) VALUES"
            " ('00000000-0000-4000-8000-000000000090', '00000000-0000-4000-8000-000000000091',"
            " 'CONTRADICTS')")
rms_duck.refresh_index(con)
ranking = ("SELECT * FROM rms_candidates('race dachshund chess work name Janne peanuts luck',"
           " k := 20)")
question = {"query": "When did Sophie adopt the dog?", "reference_time": "2024-03-01T00:00:00Z"}
for config, budget in (({}, 400), ({"context_citations": True}, 400), ({}, 190),
                       (question, 500), ({"context_format": "compact"}, 400),
                       ({"representation_policy": "budget_fraction"}, 300),
                       ({"overhead_tokens": 0}, 140)):
    rms_duck.pack(con, ranking, budget=budget, config=config, session_id="v5")
assert rms_duck.verify_receipts(con) == []
for table in ("rms_nodes", "rms_edges", "rms_bundles", "rms_receipts"):
    con.execute(f"COPY {table} TO '{out}/{table}.json' (FORMAT json)")

# Made with rms_duck at commit fd1ce55 (receipt_version 7: every reader record line named
# its speaker, 'Maya:"text"'):
#   PYTHONPATH=<checkout at fd1ce55> python tests/data/receipts_v7_speakers/make.py \
#       tests/data/receipts_v7_speakers
# Each pack is one that version 8 packs differently (a speaker line opens each run of one
# speaker's records), so replay must rebuild version 7's bytes.
import sys
from datetime import UTC, datetime

import pyarrow as pa

import rms_duck

out = sys.argv[1]
con = rms_duck.connect()


def table(rows):
    # Every key of every row: pa.Table.from_pylist takes its columns from the first row.
    keys = sorted({key for row in rows for key in row})
    return pa.Table.from_pylist([{k: r.get(k) for k in keys} for r in rows])


def at(d, h=9, m=0):
    return datetime(2026, 1, d, h, m, tzinfo=UTC)


def turn(i, speaker, text, when, session="s1", score=None):
    return {"id": f"t{i}", "score": score if score is not None else 1 - i / 100,
            "content": text, "speaker": speaker, "event_time": when, "session_id": session,
            "session_position": i}


dialogue = [
    turn(1, "Maya", "I moved to Lisbon last week.", at(3)),
    turn(2, "Maya", "The flat is near the river.", at(3)),
    turn(3, "Ben", "Congratulations! How is the commute?", at(3)),
    turn(4, "Maya", "Twenty minutes by tram.", at(3)),
    turn(5, "Ben", "I started the trumpet course.", at(5), "s2"),
    turn(6, "Ben", "My teacher is very patient.", at(5), "s2"),
    turn(7, "Maya", "Flat hunting is over.", at(5, 18, 40), "s3"),
    turn(8, "Maya", "Signed the lease today.", at(5, 18, 40), "s3"),
]
mixed = [
    *dialogue[:4],
    {"id": "f1", "score": 0.5, "content": "Maya lives in Lisbon.", "event_time": at(3),
     "session_id": "s1", "session_position": 5},
    {"id": "q1", "score": 0.4, "content": "Saw the show.", "speaker": "2pac",
     "event_time": at(3), "session_id": "s1", "session_position": 6},
]
undated = [{"id": f"u{i}", "score": 1 - i / 10, "content": text, "speaker": speaker,
            "session_id": "s", "session_position": 10 - i}
           for i, (speaker, text) in enumerate([("Maya", "I prefer tea."),
                                                ("Maya", "Green tea, mostly."),
                                                ("Ben", "Coffee for me.")])]
for rows, budget, config in (
        (dialogue, 400, {}),
        (dialogue, 400, {"context_citations": True}),
        (dialogue, 90, {"overhead_tokens": 0}),
        (mixed, 400, {}),
        (undated, 300, {}),
        (dialogue, 400, {"session_context_packing": "adjacent"}),
        (dialogue, 400, {"context_format": "compact"})):
    rms_duck.pack(con, table(rows), budget=budget, config=config, session_id="v7")
assert rms_duck.verify_receipts(con) == []
for name in ("rms_nodes", "rms_bundles", "rms_receipts"):
    con.execute(f"COPY {name} TO '{out}/{name}.json' (FORMAT json)")

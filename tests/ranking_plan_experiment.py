"""Ranking with MATERIALIZED CTEs (as shipped) against the same macros with unmarked CTEs.

Builds two equal stores from an eval set (optionally grown: each extra copy of the turns
gets new ids and one extra word, so the index grows too), re-creates the ranking macros
with unmarked CTEs (DuckDB's default: it decides per CTE whether to inline it) on the
second, then ranks questions on both in alternation, so
both plans see the same machine load. Prints whether every query returned identical rows
and the median times (docs/ranking.md and docs/performance.md quote a run). Usage:

    python tests/ranking_plan_experiment.py examples/hard_conversations.jsonl \
        --copies 6 --every 40 --rounds 2 [--k 1000] [--no-namespace]
"""

from __future__ import annotations

import argparse
import statistics
import time

from rms_duck.duck.connection import connect
from rms_duck.duck.macros import temp_sql
from rms_duck.duck.ranking import parse_cues, parse_weights, refresh_index
from rms_duck.duck.sqlfiles import read_sql
from rms_duck.evaluation.loader import load_conversations
from rms_duck.evaluation.runner import _RANK_SQL, EvalSettings, store_turns

_COPY_SQL = (
    "INSERT INTO rms_nodes (id, namespace_id, type, content, speaker, event_time, created_at, "
    "session_id, session_position, source_type, lifecycle_state) "
    "SELECT CAST(md5(id::VARCHAR || ?) AS UUID), namespace_id, type, content || ' r' || ?, "
    "speaker, event_time, created_at, session_id, session_position, source_type, "
    "lifecycle_state FROM originals")


def store(conversations, copies: int, unmarked: bool):
    con = connect()
    store_turns(con, conversations)
    con.execute("CREATE TEMP TABLE originals AS SELECT * FROM rms_nodes")
    for copy in range(1, copies):
        con.execute(_COPY_SQL, [str(copy), str(copy)])
    refresh_index(con)
    if unmarked:  # TEMP macros shadow the stored ones; python_macros.sql shadows rms_stem
        con.execute(temp_sql("ranking.sql").replace(" AS MATERIALIZED (", " AS ("))
        con.execute(read_sql("python_macros.sql"))
    return con


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--every", type=int, default=20, help="rank every Nth question")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--no-namespace", action="store_true")
    args = parser.parse_args()
    conversations = load_conversations(args.path)
    shipped, unmarked = (store(conversations, args.copies, plain) for plain in (False, True))
    [(nodes,)] = shipped.execute("SELECT count(*) FROM rms_nodes").fetchall()
    settings = EvalSettings()
    weights = parse_weights(settings.weights).as_struct()
    cues = parse_cues(settings.cues).as_struct()
    questions = [(q.question, None if args.no_namespace else conv.conversation_id)
                 for conv in conversations for q in conv.questions][::args.every]
    times: dict[str, list[float]] = {"materialized": [], "unmarked": []}
    identical = True
    for _ in range(args.rounds):
        for question, namespace in questions:
            params = [question, namespace, args.k, weights, 0.0, cues]
            rows = []
            for name, con in (("materialized", shipped), ("unmarked", unmarked)):
                start = time.perf_counter()
                rows.append(con.execute(_RANK_SQL, params).fetchall())
                times[name].append(time.perf_counter() - start)
            identical &= rows[0] == rows[1]
    medians = {name: statistics.median(values) * 1_000 for name, values in times.items()}
    paired = statistics.median(a / b for a, b in zip(times["materialized"], times["unmarked"],
                                                     strict=True))
    print(f"{nodes:,} nodes, {len(times['unmarked'])} queries, identical rows: {identical}; "
          f"median unmarked {medians['unmarked']:.0f} ms, materialized "
          f"{medians['materialized']:.0f} ms; materialized / unmarked, median of pairs "
          f"{paired:.2f}")


if __name__ == "__main__":
    main()

"""What an agent's call costs around its ranking: `rms_duck.pack(con, sql)` against the
ranking query alone, on the same store and questions, alternating per question.

Stores an eval set's turns, then for every Nth question runs the ranking query by itself
and the same query through rms_duck.pack (unstored, then stored), and prints the medians.
Run it with two installs in turn to compare them (docs/performance.md, round 11). Usage:

    python tests/agent_call_experiment.py examples/hard_conversations.jsonl --k 50
"""

from __future__ import annotations

import argparse
import statistics
import time

import rms_duck
from rms_duck.evaluation.loader import load_conversations
from rms_duck.evaluation.runner import store_turns


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--k", type=int, default=50)
    parser.add_argument("--every", type=int, default=15, help="use every Nth question")
    parser.add_argument("--budget", type=int, default=4096)
    args = parser.parse_args()
    conversations = load_conversations(args.path)
    con = rms_duck.connect()
    store_turns(con, conversations)
    rms_duck.refresh_index(con)
    questions = [(q.question, conv.conversation_id) for conv in conversations
                 for q in conv.questions][::args.every]
    sql = f"SELECT * FROM rms_candidates(?, ?, {int(args.k)})"
    for question, namespace in questions[:3]:  # warm: caches, costs, the kept cursor
        rms_duck.pack(con, sql, budget=args.budget, params=[question, namespace])
    times: dict[str, list[float]] = {"ranking alone": [], "pack, unstored": [],
                                     "pack, stored": []}
    for question, namespace in questions:
        params = [question, namespace]
        calls = {
            "ranking alone": (con.execute, (sql, params), {}),
            "pack, unstored": (rms_duck.pack, (con, sql),
                               {"budget": args.budget, "params": params, "store": False}),
            "pack, stored": (rms_duck.pack, (con, sql),
                             {"budget": args.budget, "params": params}),
        }
        for name, (function, positional, named) in calls.items():
            start = time.perf_counter()
            result = function(*positional, **named)
            if name == "ranking alone":
                result.fetchall()
            times[name].append(time.perf_counter() - start)
    print(f"{rms_duck.__file__}: k={args.k}, {len(questions)} questions: " + "; ".join(
        f"{name} {statistics.median(values) * 1_000:.0f} ms" for name, values in times.items()))


if __name__ == "__main__":
    main()

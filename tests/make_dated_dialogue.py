"""Build examples/dated_dialogue.jsonl: dated, multi-speaker, many-session dialogue.

The framing measurements of `rms-duck eval` (record-text share, evidence against the plain
lines ceiling) need dialogue shaped like real multi-session chat logs: every turn of a
session carries the session's time (as LoCoMo and LongMemEval do), three speakers, and many
sessions. The evidence and questions are those of tests/make_eval_conversations.py, spread
over 14 sessions per conversation with seeded small talk from a third speaker too. Run
`python tests/make_dated_dialogue.py --out examples/dated_dialogue.jsonl`; the output never
changes (tests/test_eval.py checks the shipped file).
"""

from __future__ import annotations

import json
import random
import sys
from datetime import timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import jsonl_out  # noqa: E402  (the generators' shared --out handling)
import make_eval_conversations as base  # noqa: E402  (the shared evidence and small talk)

SESSIONS = 14
TURNS_PER_SESSION = 30
THIRD = {"ana-ben": "Noor", "raj-mei": "Tomas", "lucas-sofia": "Ilse"}


def build(conv: dict, index: int) -> dict:
    rng = random.Random(f"rms-duck-dated-{index}")
    speakers = (*conv["speakers"], THIRD[conv["conversation_id"]])
    evidence_sessions = sorted(rng.sample(range(1, SESSIONS + 1), len(conv["sessions"])))
    by_session = dict(zip(evidence_sessions, conv["sessions"], strict=True))
    turns, ids = [], {}
    when = conv["start"]
    for s in range(1, SESSIONS + 1):
        when += timedelta(days=3 + rng.randrange(9), minutes=rng.randrange(-90, 90))
        lines = [(None, speakers[rng.randrange(3)], None) for _ in range(TURNS_PER_SESSION)]
        for key, speaker, text in by_session.get(s, ()):
            lines.insert(rng.randrange(len(lines) + 1), (key, speaker, text))
        stamp = when.replace(second=0).isoformat() + "Z"  # the session time, on every turn
        for t, (key, speaker, text) in enumerate(lines, start=1):
            if text is None:
                text = (rng.choice(base.SMALL_TALK) if rng.random() < 0.6
                        else rng.choice(base.REPLIES))
                if rng.random() < 0.4:
                    text += " " + rng.choice(base.SMALL_TALK)
            turn_id = f"S{s}:{t}"
            if key is not None:
                ids[key] = turn_id
            turns.append({"id": turn_id, "session": f"S{s}", "time": stamp,
                          "speaker": speaker, "text": text})
    return base.conversation_record(conv, turns, ids)


def render() -> str:
    return "".join(json.dumps(build(conv, i), ensure_ascii=False) + "\n"
                   for i, conv in enumerate(base.CONVERSATIONS))


def main(argv: list[str] | None = None) -> int:
    args = jsonl_out.parser(__doc__).parse_args(argv)
    return jsonl_out.emit(render(), args.out)


if __name__ == "__main__":
    raise SystemExit(main())

"""Synthetic memory records for the speed bench, and the RFC-literal reference packer.

Everything is generated from a seed, offline, so two runs of the bench measure the same
work. Texts are English-like notes of 6 to 50 words (about 10 to 140 tokens), with dates,
speakers and retrieval paths in the proportions a chat memory store shows.
"""

from __future__ import annotations

import inspect
import random
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from ..formats import RecordView, get_format
from ..formats.metadata import metadata_line
from ..records import Candidate, Level, Section

_SYLLABLES = ("ka", "lo", "ri", "men", "ta", "vo", "sel", "dra", "pu", "ne", "shi", "gor",
              "al", "be", "tri", "son", "mar", "ix", "ed", "ung")
_COMMON = ("the", "a", "to", "and", "of", "in", "we", "is", "for", "on", "with", "that",
           "was", "it", "at", "about", "after", "before", "project", "meeting", "budget",
           "deadline", "release", "review", "database", "customer", "decided", "moved",
           "Alice", "Bob", "Maya", "Tuesday", "June", "2024", "3.2", "v2", "12:30", "$40")
_PUNCT = (".", ",", ";", "!", "?", ":", "")
_TYPES = ("note", "note", "fact", "event", "decision", "preference")
_EPOCH = datetime(2023, 1, 1, tzinfo=UTC)


def vocabulary(seed: int = 0) -> list[str]:
    """About 400 invented words plus common English ones: enough variety for real BPE work."""
    rng = random.Random(seed)
    words = {a + b + (rng.choice(_SYLLABLES) if rng.random() < 0.4 else "")
             for a in _SYLLABLES for b in _SYLLABLES}
    return sorted(words) + list(_COMMON) * 6


# rms-duck bench --text: what the candidates' texts are, as the report names them
TEXTS = {"notes": "English-like notes of invented words",
         "dialogue": "two-speaker dialogue turns in 16 languages and 10 scripts"}


def make_rows(n: int, *, seed: int = 0, text: str = "notes") -> list[dict[str, Any]]:
    """n candidate rows as SQL would pass them: every field present, most of them NULL.
    text="dialogue": turns of multilingual sessions instead (dialogue.py)."""
    if text == "dialogue":
        from .dialogue import dialogue_rows

        return dialogue_rows(n, seed=seed)
    if text != "notes":
        raise ValueError(f"text must be one of {', '.join(TEXTS)}, got {text!r}")
    rng = random.Random(seed)
    words = vocabulary(seed)
    fields = Candidate.__slots__
    rows = []
    for _ in range(n):
        row = dict.fromkeys(fields)
        row.update(
            id=str(uuid.UUID(int=rng.getrandbits(128))),
            score=round(rng.random(), 6),
            content=_sentence(rng, words, rng.randint(6, 50)),
            type=rng.choice(_TYPES),
            paths=["VECTOR", "LEXICAL"] if rng.random() < 0.3 else [rng.choice(("VECTOR",
                                                                             "LEXICAL"))],
        )
        if rng.random() < 0.7:
            row["event_time"] = _EPOCH + timedelta(minutes=rng.randint(0, 800_000))
        if rng.random() < 0.4:
            row["speaker"] = rng.choice(("Alice", "Bob", "Maya"))
        if rng.random() < 0.005:
            row["salience"] = 1.0
        rows.append(row)
    return rows


def _sentence(rng: random.Random, words: Sequence[str], length: int) -> str:
    picked = [rng.choice(words) for _ in range(length)]
    for i in range(5, length, rng.randint(6, 14)):
        picked[i] += rng.choice(_PUNCT)
    text = " ".join(picked)
    return text[:1].upper() + text[1:] + "."


def record_lines(candidates: Sequence[Candidate], context_format: str = "reader") -> list[str]:
    """Each candidate's FULL line, rendered as the packer renders it (the loop (a) input)."""
    fmt = get_format(context_format)
    return [fmt.record_line(RecordView(c, Level.FULL, c.content, None, ())) for c in candidates]


def rfc_literal_pack(candidates: Sequence[Candidate], *, budget: int, overhead: int,
                     count: Callable[[str], int], deadline: float,
                     context_format: str = "reader") -> int | None:
    """The RFC-literal baseline (e): for every candidate it tries, in score order, re-render
    every packed record and re-count the whole context; keep the candidate if it fits.

    No per-line cache, no preflight, no floor; it stops when nothing is left (the reader
    format has no REFERENCE level for the RFC's own break). Returns the tokens used, or None
    when time.perf_counter() passes `deadline` first.
    """
    fmt = get_format(context_format)
    render = inspect.unwrap(fmt.record_line)  # the renderer itself, without the line memo
    header = fmt.header(speakers=any(c.speaker for c in candidates), citations=False)
    label = fmt.section_label(Section.CONTEXT, None)
    available = budget - overhead
    packed: list[Candidate] = []
    used = 0
    for c in sorted(candidates, key=lambda c: (-c.score, c.id)):
        if used >= available:
            break
        if time.perf_counter() > deadline:
            return None
        trial = packed + [c]
        lines = [header, label] + [render(fmt, RecordView(x, Level.FULL, x.content, None, ()))
                                   for x in trial]
        lines.append(metadata_line(tokens_used=available, budget=budget, conflicts=[],
                                   excluded_count=len(candidates) - len(trial)))
        n = count("".join(line + "\n" for line in lines))
        if n <= available:
            packed, used = trial, n
    return used


BULK_NODES_SQL = (
    "CREATE OR REPLACE TEMP TABLE bench_nodes AS SELECT i AS node, "
    "md5(i::VARCHAR || ?) AS id, "
    "array_to_string(list_transform(range((6 + hash(i, ?) % 45)::BIGINT), "
    "lambda x: list_extract(?::VARCHAR[], (1 + hash(i, x, ?) % ?)::BIGINT)), ' ') || '.' "
    "AS content, "
    "CASE WHEN hash(i, 'when') % 10 < 7 THEN TIMESTAMPTZ '2023-01-01 00:00:00+00' "
    "+ to_minutes((hash(i, 'm') % 800000)::BIGINT) END AS event_time, "
    "CASE hash(i, 'who') % 5 WHEN 0 THEN 'Alice' WHEN 1 THEN 'Bob' END AS speaker "
    "FROM range(?) t(i)"
)
BULK_CANDIDATES_SQL = (
    "CREATE OR REPLACE TEMP TABLE bench_candidates AS SELECT p.q, n.id, "
    "(hash(p.q, p.j) % 1000000) / 1000000.0 AS score, n.content, n.event_time, n.speaker "
    "FROM (SELECT q, j, (hash(q, j, 'pick') % ?)::BIGINT AS node "
    "FROM range(?) a(q), range(?) b(j)) p JOIN bench_nodes n USING (node) ORDER BY p.q, p.j"
)
BULK_PACK_SQL = (
    "SELECT q, pack_context(list({'id': id, 'score': score, 'content': content, "
    "'event_time': event_time, 'speaker': speaker}), ?) AS bundle "
    "FROM bench_candidates WHERE q < ? GROUP BY q"
)
BULK_LISTS_SQL = (  # the same GROUP BY without packing: DuckDB's own share of the memory
    "SELECT q, list({'id': id, 'score': score, 'content': content, "
    "'event_time': event_time, 'speaker': speaker}) AS candidates "
    "FROM bench_candidates WHERE q < ? GROUP BY q"
)
BULK_SUMMARY_SQL = "SELECT count(*), max(bundle.tokens_used) FROM (" + BULK_PACK_SQL + ")"
BULK_STORE_SQL = (  # the same groups packed and stored from SQL: count and distinct receipts
    "SELECT count(*), count(DISTINCT receipt_id) FROM (SELECT q, rms_store(list({'id': id, "
    "'score': score, 'content': content, 'event_time': event_time, 'speaker': speaker}), ?) "
    "AS receipt_id FROM bench_candidates WHERE q < ? GROUP BY q)")
BULK_CHECK_SQL = "SELECT bundle.context, bundle.tokens_used FROM (" + BULK_PACK_SQL + ")"


def make_bulk_tables(con, *, bundles: int, per_bundle: int, nodes: int, seed: int = 0,
                     text: str = "notes") -> None:
    """bench_nodes and bench_candidates (bundles x per_bundle rows): notes generated in SQL,
    or (text="dialogue") the dialogue turns of make_rows() as the nodes."""
    if text == "notes":
        words = vocabulary(seed)
        con.execute(BULK_NODES_SQL, [str(seed), seed, words, seed, len(words), nodes])
    else:
        import pyarrow as pa

        rows = make_rows(nodes, seed=seed, text=text)
        turns = pa.table({"node": list(range(nodes)), "id": [r["id"] for r in rows],
                          **{f: [r[f] for r in rows] for f in ("content", "event_time",
                                                               "speaker")}})
        con.register("bench_turns", turns)
        try:
            con.execute("CREATE OR REPLACE TEMP TABLE bench_nodes AS SELECT * FROM bench_turns")
        finally:
            con.unregister("bench_turns")
    con.execute(BULK_CANDIDATES_SQL, [nodes, bundles, per_bundle])

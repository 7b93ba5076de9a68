"""Run the evidence-retention evaluation: store turns, rank in SQL, pack under each setting.

Each question is ranked once with rms_candidates() (the project's own SQL ranking) and the
same candidates are packed at every budget, multi-path ordering and representation policy.
A labelled evidence turn counts as packed when its record is in the context with its text
(FULL, PROSE or STRUCTURED); a text-free pointer does not count. Results are deterministic:
only the timings differ between runs.

Framing is measured too: the share of tokens_used that is record text (content plus the
speakers shown), and the ceiling, the questions whose evidence fits when plain `speaker:
text` lines in ranking order fill the same room (budget minus overhead_tokens) with no
framing at all.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa

from ..bundle import MemoryBundle
from ..candidates import to_candidates
from ..config import ORDERINGS, POLICIES, PackingConfig
from ..duck.connection import connect
from ..duck.ranking import (
    RankingCues,
    RankingWeights,
    parse_cues,
    parse_weights,
    refresh_index,
)
from ..formats import RecordView
from ..packing.layout import dated, speaker_run
from ..packing.pipeline import pack_candidates
from ..packing.represent import representation_text
from ..records import TEXT_LEVELS, Candidate
from ..tokens.counter import LineCounter
from .loader import Conversation, Question

BUDGETS = (2048, 4096, 8192)
_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
_RANK_SQL = "SELECT * FROM rms_candidates(?, ?, ?, weights := ?, ngram_min := ?, cues := ?)"
_TURN_COLUMNS = ("id", "namespace_id", "content", "speaker", "event_time", "created_at",
                 "session_id", "session_position")
_INSERT_SQL = (
    "INSERT INTO rms_nodes (id, namespace_id, type, content, speaker, event_time, created_at, "
    "session_id, session_position, source_type, lifecycle_state) "
    "SELECT CAST(id AS UUID), namespace_id, 'event', content, speaker, event_time, created_at, "
    "session_id, session_position, 'user_stated', 'stable' FROM rms_eval_turns "
    "ON CONFLICT DO NOTHING"
)


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalSettings:
    """What to run: budgets x orderings x representation policies, over the first `limit`
    questions, ranking up to `k` candidates per question. ngram_min 0 lets every turn that
    shares a trigram with the question compete, so the budget, not the ranking, decides."""

    budgets: tuple[int, ...] = BUDGETS
    orderings: tuple[str, ...] = ORDERINGS
    policies: tuple[str, ...] = POLICIES
    context_format: str = "reader"
    encoding: str | None = None  # None: the model's, else o200k_base
    model: str | None = None
    k: int = 1000
    ngram_min: float = 0.0
    limit: int | None = None
    weights: RankingWeights = field(default_factory=RankingWeights)
    cues: RankingCues = field(default_factory=RankingCues)

    def configs(self) -> list[tuple[int, str, str]]:
        return [(b, o, p) for b in self.budgets for o in self.orderings for p in self.policies]


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalRun:
    """Aggregated results (deterministic) and timings (not)."""

    results: list[dict[str, Any]]
    ranking: list[dict[str, Any]]
    timings: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {"results": self.results, "ranking": self.ranking, "timings": self.timings}


@dataclass(slots=True)
class _Tally:
    questions: int = 0
    evidence: int = 0
    packed: int = 0
    complete: int = 0
    tokens: int = 0
    text_tokens: int = 0  # record text (content + speaker) tokens in the packed contexts
    ceiling_complete: int = 0  # questions whose evidence fits as plain `speaker: text` lines


def run_eval(conversations: Sequence[Conversation], *, settings: EvalSettings | None = None,
             con: Any = None, progress: Callable[[int, int], None] | None = None) -> EvalRun:
    """Evaluate evidence retention over `conversations`.

    Args:
        conversations: parsed by load_conversations().
        settings: budgets, orderings, policies, format, k, limit and ranking weights.
        con: a registered DuckDB connection to store the turns in (default: a new in-memory one).
        progress: called with (questions done, questions total) after each question.

    Returns:
        An EvalRun whose results hold one row per (budget, ordering, policy, category), plus
        category "all".
    """
    settings = settings or EvalSettings()
    weights = parse_weights(settings.weights).as_struct()
    cues = parse_cues(settings.cues).as_struct()
    started = time.perf_counter()
    work = _select(conversations, settings.limit)
    own = con is None
    con = connect() if own else con
    try:
        store_turns(con, [conv for conv, _ in work])
        refresh_index(con)
        tallies: dict[tuple, _Tally] = defaultdict(_Tally)
        ranked: dict[str, _Tally] = defaultdict(_Tally)
        rank_seconds = pack_seconds = 0.0
        total = sum(len(questions) for _, questions in work)
        done = 0
        for conv, questions in work:
            for question in questions:
                t0 = time.perf_counter()
                rows = con.sql(_RANK_SQL, params=[question.question, conv.conversation_id,
                                                  settings.k, weights, settings.ngram_min,
                                                  cues]
                              ).to_arrow_table()
                candidates = to_candidates(rows.to_pylist())
                rank_seconds += time.perf_counter() - t0
                evidence = set(conv.node_ids(question.evidence))
                _count_ranked(ranked, question, evidence, candidates)
                t0 = time.perf_counter()
                _pack_all(tallies, settings, question, evidence, candidates)
                pack_seconds += time.perf_counter() - t0
                done += 1
                if progress is not None:
                    progress(done, total)
    finally:
        if own:
            con.close()
    timings = {"rank_seconds": round(rank_seconds, 3), "pack_seconds": round(pack_seconds, 3),
               "total_seconds": round(time.perf_counter() - started, 3),
               "packs": total * len(settings.configs())}
    return EvalRun(results=_rows(tallies, settings), ranking=_ranking_rows(ranked),
                   timings=timings)


def _select(conversations: Sequence[Conversation],
            limit: int | None) -> list[tuple[Conversation, tuple[Question, ...]]]:
    """Conversations with their questions, cut after the first `limit` questions."""
    work, left = [], limit
    for conv in conversations:
        questions = conv.questions if left is None else conv.questions[:left]
        if questions:
            work.append((conv, questions))
        if left is not None:
            left -= len(questions)
            if left <= 0:
                break
    return work


def store_turns(con: Any, conversations: Sequence[Conversation]) -> None:
    """Insert every turn as an event node in its conversation's namespace (idempotent)."""
    columns: dict[str, list[Any]] = {name: [] for name in _TURN_COLUMNS}
    for conv in conversations:
        for i, t in enumerate(conv.turns):
            # created_at is the ranking's tie-break after the score: make it come from the data.
            when = t.time
            if when is not None and when.tzinfo is None:
                when = when.replace(tzinfo=UTC)
            created = when or _EPOCH + timedelta(seconds=i)
            for name, value in zip(_TURN_COLUMNS, (
                    t.node_id, conv.conversation_id, t.text, t.speaker, when, created,
                    t.session, t.position), strict=False):
                columns[name].append(value)
    # One Arrow scan instead of executemany: row-at-a-time inserts take seconds per thousand.
    con.register("rms_eval_turns", pa.table(columns))
    try:
        con.execute(_INSERT_SQL).fetchall()
    finally:
        con.unregister("rms_eval_turns")


def _count_ranked(ranked: dict[str, _Tally], question: Question, evidence: set[str],
                  candidates: list[Candidate]) -> None:
    found = len(evidence & {c.id for c in candidates})
    for key in (question.category, "all"):
        tally = ranked[key]
        tally.questions += 1
        tally.evidence += len(evidence)
        tally.packed += found
        tally.complete += found == len(evidence)


def _model_or_default(settings: EvalSettings) -> str:
    """The encoding PackingConfig would pick when none is named."""
    if settings.model is not None:
        from ..tokens.models import encoding_for_model

        return encoding_for_model(settings.model)
    from ..tokens.encodings import DEFAULT_ENCODING

    return DEFAULT_ENCODING


def _pack_all(tallies: dict[tuple, _Tally], settings: EvalSettings, question: Question,
              evidence: set[str], candidates: list[Candidate]) -> None:
    by_id = {c.id: c for c in candidates}
    ceilings: dict[int, bool] = {}
    for budget, ordering, policy in settings.configs():
        config = PackingConfig(context_format=settings.context_format,
                               multipath_ordering=ordering, representation_policy=policy,
                               model=settings.model,
                               encoding=settings.encoding or _model_or_default(settings))
        bundle = pack_candidates(candidates, budget=budget, config=config)
        shown = {r.id for r in bundle.included if r.representation in TEXT_LEVELS}
        packed = len(evidence & shown)
        text_tokens = record_text_tokens(bundle, by_id, config)
        if budget not in ceilings:
            fits = plain_lines_ceiling(candidates, budget - config.overhead_tokens, config)
            ceilings[budget] = evidence <= fits
        for category in (question.category, "all"):
            key = (budget, ordering, policy, category)
            tally = tallies[key]
            tally.questions += 1
            tally.evidence += len(evidence)
            tally.packed += packed
            tally.complete += packed == len(evidence)
            tally.tokens += bundle.tokens_used
            tally.text_tokens += text_tokens
            tally.ceiling_complete += ceilings[budget]


def record_text_tokens(bundle: MemoryBundle, by_id: dict[str, Candidate],
                       config: PackingConfig) -> int:
    """Tokens of the packed records' own text plus the speaker names shown with them:
    what the context spends on memory rather than on framing. A speaker line names its
    speaker once for its run of records, so it is counted once."""
    counter = LineCounter(config.encoding)
    fmt = config.format
    total = 0
    last_run: tuple | None = None  # the run the previous packed record belongs to
    for record in bundle.included:
        c = by_id[record.id]
        text = representation_text(c, record.representation)
        if text is None or record.representation not in TEXT_LEVELS:
            last_run = None
            continue
        total += counter.count(text)
        view = RecordView(c, record.representation, text, record.ref,
                          (c.id,) if record.conflict else ())
        if not (c.speaker and fmt.shows_speaker(view)):
            last_run = None
            continue
        run = speaker_run(fmt, view)
        this_run = None if run is None else (record.namespace_id, record.section, run,
                                             dated(fmt, view))
        if this_run is None or this_run != last_run:
            total += counter.count(c.speaker)
        last_run = this_run
    return total


def plain_lines_ceiling(candidates: Sequence[Candidate], room: int,
                        config: PackingConfig) -> set[str]:
    """The ceiling an unframed packer reaches: `speaker: text` lines in ranking order (score,
    then id), each kept when it still fits `room` tokens; no header, date or metadata."""
    counter = LineCounter(config.encoding)
    kept: set[str] = set()
    used = 0
    for c in sorted(candidates, key=lambda c: (-c.score, c.id)):
        if not c.has_text:
            continue
        line = f"{c.speaker}: {c.content}" if c.speaker else c.content
        cost = counter.count(line + "\n")
        if used + cost <= room:
            kept.add(c.id)
            used += cost
    return kept


def _rows(tallies: dict[tuple, _Tally], settings: EvalSettings) -> list[dict[str, Any]]:
    categories = sorted({key[3] for key in tallies} - {"all"})
    rows = []
    for budget, ordering, policy in settings.configs():
        for category in ["all", *categories]:
            tally = tallies.get((budget, ordering, policy, category))
            if tally is None:
                continue
            rows.append({
                "budget": budget, "ordering": ordering, "representation_policy": policy,
                "category": category, "questions": tally.questions,
                "evidence_turns": tally.evidence,
                "evidence_recall": _share(tally.packed, tally.evidence),
                "all_evidence_share": _share(tally.complete, tally.questions),
                "mean_tokens_used": round(tally.tokens / tally.questions, 2),
                "record_text_share": _share(tally.text_tokens, tally.tokens),
                "ceiling_all_evidence_share": _share(tally.ceiling_complete, tally.questions),
                "all_evidence_vs_ceiling": _share(tally.complete, tally.ceiling_complete),
            })
    return rows


def _ranking_rows(ranked: dict[str, _Tally]) -> list[dict[str, Any]]:
    return [{"category": key, "questions": t.questions, "evidence_turns": t.evidence,
             "evidence_ranked": _share(t.packed, t.evidence),
             "all_evidence_ranked": _share(t.complete, t.questions)}
            for key, t in sorted(ranked.items(), key=lambda kv: (kv[0] != "all", kv[0]))]


def _share(part: int, whole: int) -> float:
    return round(part / whole, 6) if whole else 0.0

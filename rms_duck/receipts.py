"""Receipt bodies: canonical, deterministic JSON that explains every decision of one pack.

The body holds no clock reading or id, so the same inputs always give the same bytes.
Storage (duck/storage.py) wraps it with the chain fields and digests the whole.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from datetime import datetime
from enum import Enum
from typing import Any

from .config import PackingConfig
from .escape import canonical_json, utf8
from .model import Candidate, Decision

RECEIPT_VERSION = 1


def sha256_text(text: str) -> str:
    return hashlib.sha256(utf8(text)).hexdigest()


def candidate_to_dict(c: Candidate) -> dict[str, Any]:
    """A JSON-ready form of a candidate that to_candidate() reads back to an equal value."""
    out: dict[str, Any] = {}
    for name in c.__slots__:
        value = getattr(c, name)
        if isinstance(value, Enum):
            value = value.value
        elif isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


def decision_to_dict(d: Decision) -> dict[str, Any]:
    key = d.order_key
    return {
        "id": d.id, "score": d.score, "content_sha256": d.content_sha256, "tier": d.tier,
        "order_key": "head" if key is not None and math.isinf(key) else key,
        "tried": list(d.tried), "chosen": d.chosen, "tokens": d.tokens,
        "decision": d.decision, "reason": d.reason, "position": d.position,
    }


def receipt_body(*, config: PackingConfig, encoding_sha256: str, budget: int, available: int,
                 tokens_used: int, context_sha256: str, flags: Sequence[str],
                 conflicts: Sequence[Sequence[str]], metrics: dict[str, float | None],
                 decisions: Sequence[Decision], guidance: bool) -> dict[str, Any]:
    return {
        "receipt_version": RECEIPT_VERSION,
        "encoding": {"name": config.encoding, "sha256": encoding_sha256},
        "config": config.to_dict(),
        "budget": budget,
        "available": available,
        "tokens_used": tokens_used,
        "context_sha256": context_sha256,
        "flags": list(flags),
        "conflicts": [list(pair) for pair in conflicts],
        "guidance_shown": guidance,
        "metrics": metrics,
        "candidates": [decision_to_dict(d) for d in decisions],
    }


def inputs_json(candidates: Sequence[Candidate]) -> str:
    """Canonical JSON of the candidate inputs, sorted so input order does not matter."""
    rows = sorted((candidate_to_dict(c) for c in candidates), key=canonical_json)
    return canonical_json(rows)


def encode_receipt(body: dict[str, Any]) -> str:
    return canonical_json(body)

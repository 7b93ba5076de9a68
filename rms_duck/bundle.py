"""MemoryBundle: the packed context plus everything needed to explain and audit it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .config import PackingConfig
from .errors import ContextRefError, did_you_mean
from .records import Decision, ExcludedRecord, IncludedRecord


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBundle:
    context: str
    tokens_used: int
    context_budget: int
    available: int
    included: tuple[IncludedRecord, ...]
    excluded: tuple[ExcludedRecord, ...]
    conflicts: tuple[tuple[str, str], ...]
    flags: tuple[str, ...]
    context_references: Mapping[str, str]
    context_guidance: str | None
    config: PackingConfig
    metrics: Mapping[str, float | None]
    context_sha256: str
    explain: Callable[[], tuple[tuple[Decision, ...], str]] = field(repr=False, compare=False)
    receipt_id: str | None = field(default=None)
    _explained: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    # The per-candidate decisions and the receipt are built on first use: a caller that
    # only reads the context does not pay for a receipt entry per candidate.
    @property
    def decisions(self) -> tuple[Decision, ...]:
        return self._explanation()[0]

    @property
    def receipt(self) -> str:
        """Canonical receipt JSON (deterministic: no clock, no ids)."""
        return self._explanation()[1]

    def _explanation(self) -> tuple[tuple[Decision, ...], str]:
        got = self._explained.get("value")
        if got is None:
            got = self._explained["value"] = self.explain()
        return got

    def render(self) -> str:
        """Exactly the context text whose tokens tokens_used counts."""
        return self.context

    @property
    def excluded_ids(self) -> list[str]:
        return [record.id for record in self.excluded]

    @property
    def included_ids(self) -> list[str]:
        return [record.id for record in self.included]

    def resolve_context_ref(self, ref: str) -> str:
        """The node id behind a citation such as 'm3'.

        Raises:
            ContextRefError: no packed record carries that reference.
        """
        try:
            return self.context_references[ref]
        except KeyError:
            known = sorted(self.context_references, key=lambda r: int(r[1:]))
            hint = did_you_mean(ref, known) if known else " This bundle has no citations."
            raise ContextRefError(
                f"unknown context reference {ref!r}.{hint} Known: {', '.join(known) or 'none'}"
            ) from None

    def to_row(self) -> dict[str, Any]:
        """The STRUCT pack_context() returns in SQL."""
        return {
            "context": self.context,
            "tokens_used": self.tokens_used,
            "context_budget": self.context_budget,
            "included": [
                {"id": r.id, "section": r.section.value, "representation": r.representation.value,
                 "tokens": r.tokens, "ref": r.ref, "score": r.score, "tier": int(r.tier),
                 "conflict": r.conflict}
                for r in self.included
            ],
            "excluded": [
                {"id": r.id, "reason": r.reason.value, "score": r.score,
                 "tier": None if r.tier is None else int(r.tier)}
                for r in self.excluded
            ],
            "conflicts": [list(pair) for pair in self.conflicts],
            "flags": list(self.flags),
            "context_references": [{"ref": k, "id": v} for k, v in self.context_references.items()],
            "context_guidance": self.context_guidance,
            "context_sha256": self.context_sha256,
            "receipt": self.receipt,
        }

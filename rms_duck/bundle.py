"""MemoryBundle: the packed context plus everything needed to explain and audit it."""

from __future__ import annotations

import html
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final

from .config import PackingConfig
from .errors import ContextRefError, RmsError, did_you_mean
from .receipts import has_content, join_fragments, receipt_body, receipt_fragments
from .records import Decision, ExcludedRecord, IncludedRecord, Reason, Tier
from .sha import sha256_text

# One candidate's fate, frozen when the pack ends: (id, score, content, source_type,
# epistemic, has_text, tier, order_key, tried, chosen, tokens, reason, position), with the
# enums' values, and has_text (the content is not blank) for a packed candidate, None for
# the others. Plain values only, so a bundle keeps no candidate or packer state alive, and
# the collector stops scanning the rows after one look: a pack's candidates, built from the
# caller's rows, die with it instead of being scanned as the bundle's (8% of a warm pack of
# 10,000 dict rows).
TraceRow = tuple[str, float, str, str, str, bool | None, int | None, float | None,
                 tuple[str, ...], str | None, int, str | None, int | None]
# Where the fields read without unpacking the whole row sit in it (Final: mypy then types
# row[ROW_ID] as the field's own type).
ROW_ID: Final = 0
ROW_SCORE: Final = 1
ROW_TIER: Final = 6
ROW_CHOSEN: Final = 9
ROW_REASON: Final = 11


@dataclass(frozen=True, slots=True, kw_only=True, repr=False)
class MemoryBundle:
    context: str
    tokens_used: int
    context_budget: int
    available: int
    included: tuple[IncludedRecord, ...]
    conflicts: tuple[tuple[str, str], ...]
    flags: tuple[str, ...]
    context_references: Mapping[str, str]
    context_guidance: str | None
    config: PackingConfig
    metrics: Mapping[str, float | None]
    context_sha256: str
    encoding_sha256: str
    guidance_shown: bool
    trace: tuple[TraceRow, ...] = field(repr=False, compare=False)
    receipt_id: str | None = field(default=None)
    # Why the context is empty, when it is (see the NO_CANDIDATES and NOTHING_FIT flags).
    warnings: tuple[str, ...] = field(default=())
    # The receipt's candidates carry has_content (receipt version 7 on); False in a replay
    # of a receipt of version 6 or earlier, whose candidate rows it writes again.
    with_has_content: bool = field(default=True, repr=False, compare=False)
    _derived: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    # The excluded records, decisions, the receipt body and its text derive from the frozen
    # trace on first use, once each: a caller that only reads the context pays for none.
    @property
    def excluded(self) -> tuple[ExcludedRecord, ...]:
        """The candidates left out, each with its reason, score and tier: those the packer
        passed over in id order, then those below min_score, then the duplicates."""
        got = self._derived.get("excluded")
        if got is None:
            got = self._derived["excluded"] = excluded_records(self.trace)
        return got

    @property
    def excluded_count(self) -> int:
        """len(excluded), without building the records: every candidate has one trace row."""
        return len(self.trace) - len(self.included)

    def __setstate__(self, state: list[Any]) -> None:
        # The dataclass's own, which pairs the values with fields() by position, after
        # checking there are as many: a bundle pickled by an rms_duck whose fields differ
        # (excluded was one until 2026-12-04) loaded with every later value one field off.
        names = _FIELD_NAMES
        if len(state) != len(names):
            raise RmsError(
                f"this MemoryBundle was pickled by another version of rms_duck ({len(state)} "
                f"fields, this version has {len(names)}); pickles move bundles between "
                "processes of one version: keep the receipt, and rms_duck.replay() it, to "
                "have the bundle again")
        for name, value in zip(names, state, strict=True):
            object.__setattr__(self, name, value)

    def __eq__(self, other: object) -> bool:
        # The dataclass's field-by-field equality, with the derived excluded records too: two
        # bundles that leave out different candidates are not equal.
        if other.__class__ is not self.__class__:
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in _COMPARED)

    @property
    def decisions(self) -> tuple[Decision, ...]:
        """One Decision per candidate, sorted by id (the receipt's candidate rows)."""
        got = self._derived.get("decisions")
        if got is None:
            got = self._derived["decisions"] = tuple(
                Decision(id=cid, score=score, content_sha256=sha256_text(content),
                         tier=tier, order_key=order_key, tried=tried, chosen=chosen,
                         tokens=tokens, decision="excluded" if chosen is None else "included",
                         reason=reason, position=position, source_type=source_type,
                         epistemic=epistemic,
                         has_content=(has_content(chosen, has_text) if self.with_has_content
                                      else None))
                for (cid, score, content, source_type, epistemic, has_text, tier, order_key,
                     tried, chosen, tokens, reason, position) in self.trace)
        return got

    @property
    def receipt_body(self) -> dict[str, Any]:
        """The receipt as a dict, before storage adds the chain fields. Do not mutate."""
        got = self._derived.get("body")
        if got is None:
            got = self._derived["body"] = receipt_body(
                config=self.config, encoding_sha256=self.encoding_sha256,
                budget=self.context_budget, available=self.available,
                tokens_used=self.tokens_used, context_sha256=self.context_sha256,
                flags=self.flags, conflicts=self.conflicts, metrics=self.metrics,
                decisions=self.decisions, guidance_shown=self.guidance_shown)
        return got

    @property
    def receipt_fragments(self) -> dict[str, str]:
        """The receipt body serialised per key (receipts.receipt_fragments). Do not mutate."""
        got = self._derived.get("fragments")
        if got is None:
            got = self._derived["fragments"] = receipt_fragments(
                config=self.config, encoding_sha256=self.encoding_sha256,
                budget=self.context_budget, available=self.available,
                tokens_used=self.tokens_used, context_sha256=self.context_sha256,
                flags=self.flags, conflicts=self.conflicts, metrics=self.metrics,
                trace=self.trace, guidance_shown=self.guidance_shown,
                with_has_content=self.with_has_content)
        return got

    @property
    def receipt(self) -> str:
        """Canonical receipt JSON (deterministic: no clock, no ids), built once."""
        got = self._derived.get("text")
        if got is None:
            got = self._derived["text"] = join_fragments(self.receipt_fragments)
        return got

    def __repr__(self) -> str:
        # One short line: a 32K-token bundle's field-by-field repr runs to hundreds of KB.
        flags = f", flags={','.join(self.flags)}" if self.flags else ""
        receipt = f", receipt_id={self.receipt_id}" if self.receipt_id else ""
        return (f"<MemoryBundle {self.tokens_used}/{self.context_budget} tokens, "
                f"{len(self.included)} packed, {len(self.excluded)} excluded"
                f"{flags}{receipt}, sha256={self.context_sha256[:12]}>")

    def summary_lines(self) -> list[str]:
        """tokens, records, exclusions by reason, flags and warnings, one fact per line."""
        reasons: dict[str, int] = {}
        for record in self.excluded:
            reasons[record.reason.value] = reasons.get(record.reason.value, 0) + 1
        lines = [
            f"tokens used: {self.tokens_used} of {self.context_budget} "
            f"({self.available} available after {self.config.overhead_tokens} overhead)",
            f"records packed: {len(self.included)}",
            "excluded: " + (", ".join(f"{n} {reason}" for reason, n in sorted(reasons.items()))
                            or "none"),
            f"flags: {', '.join(self.flags) or 'none'}",
        ]
        lines += [f"warning: {text}" for text in self.warnings]
        if self.receipt_id:
            lines.append(f"receipt: {self.receipt_id}")
        return lines

    def _repr_markdown_(self) -> str:
        """Notebook display: the summary, then the context in a fence it cannot close."""
        longest = max((len(run) for run in re.findall(r"`+", self.context)), default=0)
        fence = "`" * max(3, longest + 1)
        summary = "\n".join(f"- {_markdown_text(line)}" for line in self.summary_lines())
        body = self.context if self.context.endswith("\n") or not self.context else (
            self.context + "\n")
        return f"**MemoryBundle**\n\n{summary}\n\n{fence}text\n{body}{fence}\n"

    def _repr_html_(self) -> str:
        items = "".join(f"<li>{html.escape(line)}</li>" for line in self.summary_lines())
        return (f"<div><strong>MemoryBundle</strong><ul>{items}</ul>"
                f"<pre style=\"white-space: pre-wrap\">{html.escape(self.context)}</pre></div>")

    def render(self) -> str:
        """Exactly the context text whose tokens tokens_used counts."""
        return self.context

    def to_row(self) -> dict[str, Any]:
        """The STRUCT SQL pack_context() returns, as a dict of plain values (one row of
        pack_batches(); pd.DataFrame([b.to_row() for b in bundles]) for a frame)."""
        return {
            "context": self.context,
            "tokens_used": self.tokens_used,
            "context_budget": self.context_budget,
            "included": [
                {"id": r.id, "section": r.section.value,
                 "representation": r.representation.value, "tokens": r.tokens, "ref": r.ref,
                 "score": r.score, "tier": int(r.tier), "conflict": r.conflict,
                 "source_type": r.source_type, "epistemic": r.epistemic}
                for r in self.included
            ],
            "excluded": [
                {"id": r.id, "reason": r.reason.value, "score": r.score,
                 "tier": None if r.tier is None else int(r.tier)}
                for r in self.excluded
            ],
            "conflicts": [list(pair) for pair in self.conflicts],
            "flags": list(self.flags),
            "warnings": list(self.warnings),
            "context_references": [{"ref": k, "id": v}
                                   for k, v in self.context_references.items()],
            "context_guidance": self.context_guidance,
            "context_sha256": self.context_sha256,
            "receipt": self.receipt,
        }

    @property
    def excluded_ids(self) -> list[str]:
        return [record.id for record in self.excluded]

    @property
    def included_ids(self) -> list[str]:
        return [record.id for record in self.included]

    def resolve_context_ref(self, ref: str) -> str:
        """The node id behind a citation such as 'm3' (or '[m3]', as the context prints it
        and a model quotes it).

        Raises:
            ContextRefError: no packed record carries that reference.
        """
        if isinstance(ref, str) and ref.startswith("[") and ref.endswith("]"):
            ref = ref[1:-1]
        try:
            return self.context_references[ref]
        except KeyError:
            known = sorted(self.context_references, key=lambda r: int(r[1:]))
            if not known:
                # It said only "This bundle has no citations. Known: none".
                raise ContextRefError(
                    f"unknown context reference {ref!r}. This bundle has no citations: pack "
                    'with config {"context_citations": true} (reader format) or '
                    '{"context_format": "compact"} to number its records') from None
            raise ContextRefError(
                f"unknown context reference {ref!r}.{did_you_mean(ref, known)} Known: "
                f"{', '.join(known)}") from None


def _markdown_text(text: str) -> str:
    """Text shown literally in Markdown: its markup characters backslash-escaped."""
    return re.sub(r"([\\`*_{}\[\]()#+\-.!|<>])", r"\\\1", text)


_FIELD_NAMES = tuple(f.name for f in fields(MemoryBundle))
# The fields the dataclass would compare, in order, with excluded where it stood.
_COMPARED = tuple(f.name for f in fields(MemoryBundle) if f.compare)
_COMPARED = (*_COMPARED[:_COMPARED.index("included") + 1], "excluded",
             *_COMPARED[_COMPARED.index("included") + 1:])
_TIERS: dict[int | None, Tier | None] = {None: None, **{int(tier): tier for tier in Tier}}


def excluded_records(trace: tuple[TraceRow, ...]) -> tuple[ExcludedRecord, ...]:
    """The ExcludedRecord of each trace row whose candidate was not packed, in trace order."""
    reasons: Mapping[str | None, Reason] = Reason._value2member_map_  # type: ignore[assignment]
    tiers = _TIERS
    return tuple(ExcludedRecord(id=row[ROW_ID], score=row[ROW_SCORE], tier=tiers[row[ROW_TIER]],
                                reason=reasons[row[ROW_REASON]])
                 for row in trace if row[ROW_CHOSEN] is None)

"""Enums and frozen value types shared by every layer: candidates, records, reasons, flags.

Nothing here reads a clock, a random source or the database.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime

# The closed set of rendered condition states: a free-form value could forge reader tags.
CONDITION_STATES = ("true", "false", "unknown")


class _Named(enum.StrEnum):
    """An enum whose members are their SQL/JSON spelling (str() and format() give the value)."""


class NodeType(_Named):
    ENTITY = "entity"
    EVENT = "event"
    FACT = "fact"
    DECISION = "decision"
    PREFERENCE = "preference"
    TASK = "task"
    SUMMARY = "summary"
    NOTE = "note"
    INSTRUCTION = "instruction"


class Lifecycle(_Named):
    TENTATIVE = "tentative"
    STABLE = "stable"
    CONTESTED = "contested"
    SUPERSEDED = "superseded"
    DEPRECATED = "deprecated"
    ARCHIVED = "archived"


class Epistemic(_Named):
    OBSERVED = "observed"
    ASSERTED = "asserted"
    INFERRED = "inferred"
    HYPOTHETICAL = "hypothetical"
    CONDITIONAL = "conditional"
    DEPRECATED = "deprecated"
    UNVERIFIED = "unverified"


class SourceType(_Named):
    USER_STATED = "user_stated"
    USER_DEMONSTRATED = "user_demonstrated"
    SYSTEM_INFERRED = "system_inferred"
    EXTERNAL_DOCUMENT = "external_document"
    TOOL_OUTPUT = "tool_output"


class Level(_Named):
    """RFC section 4 representation levels, highest fidelity first."""

    FULL = "full"
    PROSE = "prose"
    STRUCTURED = "structured"
    KEY_VALUE = "key_value"
    REFERENCE = "reference"


LEVEL_ORDER: tuple[Level, ...] = tuple(Level)
TEXT_LEVELS = frozenset({Level.FULL, Level.PROSE, Level.STRUCTURED})


class Section(_Named):
    """RFC section 6 sections, in their canonical render order."""

    ENTITIES = "entities"
    FACTS = "facts"
    DECISIONS = "decisions"
    TASKS = "tasks"
    CONTEXT = "context"
    REFERENCES = "references"


SECTION_ORDER: tuple[Section, ...] = tuple(Section)


class Reason(_Named):
    """Why a candidate is not in the context."""

    BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
    BUDGET_OVERFLOW = "BUDGET_OVERFLOW"
    BUDGET_ERROR = "BUDGET_ERROR"
    BELOW_MIN_FIDELITY = "BELOW_MIN_FIDELITY"
    NO_TEXT = "NO_TEXT"
    FOLDED = "FOLDED"
    DUPLICATE = "DUPLICATE"
    BELOW_MIN_SCORE = "BELOW_MIN_SCORE"


class Flag(_Named):
    BUDGET_ERROR = "BUDGET_ERROR"
    BUDGET_OVERFLOW = "BUDGET_OVERFLOW"
    GUIDANCE_OMITTED = "GUIDANCE_OMITTED"
    # The context holds no record; the bundle's warnings say why.
    NO_CANDIDATES = "NO_CANDIDATES"
    NOTHING_FIT = "NOTHING_FIT"


class Tier(enum.IntEnum):
    """RFC section 5 priorities; lower packs first."""

    PINNED_OR_TASK = 1
    EPISODE = 2
    MULTI_PATH = 3
    REMAINING = 4


ACTIVE_TASK_STATES = frozenset({Lifecycle.TENTATIVE, Lifecycle.STABLE})
EPISODE_PATHS = frozenset({"EPISODE_CONTEXT", "EVIDENCE_CONTEXT"})


@dataclass(frozen=True, slots=True, kw_only=True)
class Candidate:
    """One ranked memory node offered to the packer (validated; see candidates.py)."""

    id: str
    score: float
    content: str
    type: NodeType = NodeType.NOTE
    paths: tuple[str, ...] = ()
    path_count: int | None = None
    salience: float = 0.5
    pinned: bool = False
    confidence: float = 0.5
    epistemic_type: Epistemic = Epistemic.ASSERTED
    source_type: SourceType = SourceType.USER_STATED
    lifecycle_state: Lifecycle = Lifecycle.TENTATIVE
    namespace_id: str | None = None
    event_time: datetime | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    superseded_by: str | None = None
    speaker: str | None = None
    evidence_ids: tuple[str, ...] = ()
    structured_value: str | None = None
    prose: str | None = None
    contradicts: tuple[str, ...] = ()
    session_id: str | None = None
    session_position: int | None = None
    condition_state: str | None = None
    token_cost_estimate: int | None = None

    def __hash__(self) -> int:
        # Equal candidates have equal fields, so this agrees with the generated __eq__. Packing
        # hashes a candidate with every line it prices (the render memo's key), and hashing all
        # 26 fields cost four times as much. The fields a ranking sets (score, paths, count)
        # keep one node ranked in many requests (a GROUP BY's) from filling one memo bucket
        # with unequal candidates that every lookup compared field by field: quadratic.
        try:
            return hash((self.id, self.content, self.score, self.paths, self.path_count))
        except TypeError:
            # A Candidate built by hand with a list where a tuple belongs (paths=["VECTOR"]):
            # packing accepted it before these fields were hashed. Equal candidates both
            # fail here, so hashing id and text alone still agrees with __eq__.
            return hash((self.id, self.content))

    @property
    def is_pinned(self) -> bool:
        return self.pinned or self.salience == 1.0

    @property
    def is_active_task(self) -> bool:
        return self.type is NodeType.TASK and self.lifecycle_state in ACTIVE_TASK_STATES

    @property
    def has_text(self) -> bool:
        # Not content.strip(): that copies the text; isspace() tests the same characters.
        content = self.content
        return bool(content) and not content.isspace()


@dataclass(frozen=True, slots=True, kw_only=True)
class IncludedRecord:
    id: str
    section: Section
    namespace_id: str | None
    representation: Level
    tokens: int
    ref: str | None
    score: float
    tier: Tier
    conflict: bool = False
    # Provenance the reader line does not print stays here and in the receipt (RFC ext.).
    source_type: str = "user_stated"
    epistemic: str = "asserted"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExcludedRecord:
    id: str
    reason: Reason
    score: float
    tier: Tier | None


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """What happened to one candidate: the receipt's per-candidate row."""

    id: str
    score: float
    content_sha256: str
    tier: int | None
    order_key: float | None
    tried: tuple[str, ...]
    chosen: str | None
    tokens: int
    decision: str
    reason: str | None
    position: int | None = field(default=None)
    source_type: str | None = field(default=None)
    epistemic: str | None = field(default=None)
    # Receipt version 7 on (None in a replay of version 6 or earlier, whose rows lack it).
    has_content: bool | None = field(default=None)

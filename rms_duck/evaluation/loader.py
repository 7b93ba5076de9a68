"""Read the eval JSONL format (docs/evaluation.md): one conversation per line, turns and questions.

Validation names the line, the field and the fix. Nothing here touches DuckDB.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from ..errors import RmsError
from ..timefmt import as_utc

_NODE_NAMESPACE = uuid.UUID("6f1d2c1e-5b0a-4e39-9c1e-7d2b8a0e4f10")


class EvalDataError(RmsError, ValueError):
    """An evaluation file is not in the format docs/evaluation.md describes."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Turn:
    id: str
    session: str | None
    time: datetime | None
    speaker: str | None
    text: str
    position: int
    node_id: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    id: str
    question: str
    answer: str | None
    category: str
    evidence: tuple[str, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Conversation:
    conversation_id: str
    turns: tuple[Turn, ...]
    questions: tuple[Question, ...]

    def node_ids(self, turn_ids: tuple[str, ...]) -> tuple[str, ...]:
        """The node ids the turns with these ids are stored under."""
        by_turn = {t.id: t.node_id for t in self.turns}
        return tuple(by_turn[t] for t in turn_ids)


def node_id_for(conversation_id: str, turn_id: str) -> str:
    """A stable UUID per (conversation, turn): the same file always gives the same nodes."""
    return str(uuid.uuid5(_NODE_NAMESPACE, f"{conversation_id}\x1f{turn_id}"))


def load_conversations(path: str | Path) -> list[Conversation]:
    """Parse a JSONL file of conversations.

    Raises:
        EvalDataError: unreadable JSON, a missing field, or evidence naming an unknown turn.
    """
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise EvalDataError(f"cannot read evaluation file {str(path)!r}: {exc.strerror}") from None
    conversations, seen = [], set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as exc:
            raise EvalDataError(f"{path.name} line {number}: not valid JSON ({exc})") from None
        except RecursionError:  # json's own limit: a traceback before
            raise EvalDataError(f"{path.name} line {number}: nested too deeply to read "
                                f"({line.strip()[:60]!r}...); write one conversation object "
                                "per line, as docs/evaluation.md shows") from None
        conv = _conversation(record, f"{path.name} line {number}")
        if conv.conversation_id in seen:
            raise EvalDataError(f"{path.name} line {number}: conversation_id "
                                f"{conv.conversation_id!r} appears twice; ids must be unique")
        seen.add(conv.conversation_id)
        conversations.append(conv)
    return conversations


def _conversation(record: Any, where: str) -> Conversation:
    if not isinstance(record, dict):
        raise EvalDataError(f"{where}: expected a JSON object with conversation_id, turns and "
                            f"questions, got {type(record).__name__}")
    if "conversation_id" not in record:
        # A candidates file (rms-duck pack's input) was told only "field 'conversation_id'
        # must be non-empty text, got None".
        raise EvalDataError(
            f"{where}: a conversation needs conversation_id, turns and questions, got keys "
            f"{', '.join(map(repr, list(record)[:10])) or 'none'}; write one conversation per "
            'line, {"conversation_id": "c1", "turns": [...], "questions": [...]}, as '
            "docs/evaluation.md shows (a file of candidates is rms-duck pack's input)")
    conv_id = _text(record, "conversation_id", where)
    turns, seen = [], set()
    positions: dict[str | None, int] = {}  # session -> turns seen in it so far
    for i, raw in enumerate(_list(record, "turns", where)):
        at = f"{where}, turns[{i}]"
        turn_id = _text(raw, "id", at)
        if turn_id in seen:
            raise EvalDataError(f"{at}: turn id {turn_id!r} appears twice in {conv_id!r}")
        seen.add(turn_id)
        session = _optional(raw, "session", at)
        positions[session] = positions.get(session, 0) + 1
        turns.append(Turn(id=turn_id, session=session, time=_time(raw, at),
                          speaker=_optional(raw, "speaker", at),
                          text=_text(raw, "text", at, blank=True),
                          position=positions[session], node_id=node_id_for(conv_id, turn_id)))
    known = {t.id for t in turns}
    questions = []
    for i, raw in enumerate(_list(record, "questions", where)):
        at = f"{where}, questions[{i}]"
        evidence = tuple(str(e) for e in _list(raw, "evidence", at))
        missing = [e for e in evidence if e not in known]
        if missing:
            raise EvalDataError(f"{at}: evidence {missing[0]!r} names no turn of {conv_id!r}; "
                                "list turn ids from the same conversation")
        questions.append(Question(id=_text(raw, "id", at), question=_text(raw, "question", at),
                                  answer=None if raw.get("answer") is None else str(raw["answer"]),
                                  category=str(raw.get("category") or "uncategorised"),
                                  evidence=evidence))
    return Conversation(conversation_id=conv_id, turns=tuple(turns), questions=tuple(questions))


def _text(raw: Any, field: str, where: str, blank: bool = False) -> str:
    value = raw.get(field) if isinstance(raw, dict) else None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or (not blank and not value.strip()):
        raise EvalDataError(f"{where}: field {field!r} must be non-empty text, got {value!r}; "
                            "give it as a JSON string")
    return value


def _optional(raw: dict, field: str, where: str) -> str | None:
    value = raw.get(field)
    return None if value is None else str(value)


def _list(raw: Any, field: str, where: str) -> list[Any]:
    value = raw.get(field) if isinstance(raw, dict) else None
    if not isinstance(value, list):
        raise EvalDataError(f"{where}: field {field!r} must be a list, got {value!r}; give "
                            f"it as a JSON array ([] for none)")
    return value


def _time(raw: dict, where: str) -> datetime | None:
    value = raw.get("time")
    if value is None:
        return None
    try:
        return as_utc(datetime.fromisoformat(str(value).strip().replace("Z", "+00:00")))
    except ValueError:
        raise EvalDataError(f"{where}: field 'time' must be ISO-8601 such as "
                            f"'2024-03-02T18:00:00Z', got {value!r}") from None

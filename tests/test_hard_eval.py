"""The hard evaluation set (examples/hard_conversations.jsonl): its shape, its generator, and
a small `rms-duck eval` run over it (the full run is the CLI's job, not the tests')."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from rms_duck.cli import main
from rms_duck.evaluation.loader import load_conversations

ROOT = Path(__file__).resolve().parent.parent
HARD = ROOT / "examples" / "hard_conversations.jsonl"
KINDS = {"single_hop", "temporal", "multi_hop", "open_domain", "adversarial"}


def _generator():
    spec = importlib.util.spec_from_file_location(
        "make_hard_conversations", Path(__file__).parent / "make_hard_conversations.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up here
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def conversations():
    return load_conversations(HARD)


def test_the_set_is_large_multi_session_and_has_every_kind(conversations):
    questions = [q for c in conversations for q in c.questions]
    assert len(questions) >= 300
    kinds = Counter(q.category for q in questions)
    assert set(kinds) == KINDS and min(kinds.values()) >= 60
    assert len({len({t.speaker for t in c.turns}) for c in conversations}) >= 3  # 2, 3, 4
    for conv in conversations:
        assert 540 <= len(conv.turns) <= 660
        assert len({t.session for t in conv.turns}) >= 18
        assert all(t.time is not None and t.speaker for t in conv.turns)
    assert HARD.stat().st_size < 3_000_000


def test_multi_hop_evidence_spans_sessions_far_apart(conversations):
    far = total = 0
    for conv in conversations:
        session = {t.id: int(t.session[1:]) for t in conv.turns}
        for q in conv.questions:
            if q.category == "multi_hop":
                total += 1
                spread = {session[e] for e in q.evidence}
                far += max(spread) - min(spread) >= 3
    assert far / total >= 0.7


def test_paraphrased_questions_share_few_words_with_their_evidence(conversations):
    """open_domain questions mostly avoid the evidence's content words (name aside)."""
    overlaps = []
    for conv in conversations:
        text = {t.id: t.text.lower() for t in conv.turns}
        names = {t.speaker.lower() for t in conv.turns}
        for q in conv.questions:
            if q.category != "open_domain":
                continue
            words = {w.strip("?,.'s").lower() for w in q.question.split()} - names
            words = {w for w in words if len(w) > 3}
            evidence = " ".join(text[e] for e in q.evidence)
            overlaps.append(sum(w in evidence.split() for w in words) / max(len(words), 1))
    assert sum(overlaps) / len(overlaps) < 0.25


@pytest.mark.slow  # 3-9 s on a 2-core machine: the slow step runs it
def test_generator_is_deterministic_and_matches_the_shipped_file():
    faker = pytest.importorskip("faker")
    module = _generator()
    small = module.SHAPES[:1]
    assert module.render(small) == module.render(small)
    if faker.VERSION != module.FAKER_VERSION:
        pytest.skip(f"Faker {faker.VERSION} differs from {module.FAKER_VERSION}")
    assert module.render() == HARD.read_text(encoding="utf-8")


# Slow: the CLI ranks and packs the hard set at each budget (about 13 s).
@pytest.mark.slow
def test_cli_reports_each_kind_at_each_budget(tmp_path, capsys):
    out = tmp_path / "r.json"
    assert main(["eval", str(HARD), "--limit", "12", "--orderings", "balanced",
                 "--policies", "highest_fit", "--quiet", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "all evidence packed, by kind of question and budget" in printed
    assert all(size in printed for size in ("2K", "4K", "8K"))
    results = json.loads(out.read_text(encoding="utf-8"))["results"]
    assert {r["budget"] for r in results} == {2048, 4096, 8192}
    assert {r["category"] for r in results} - {"all"} <= KINDS

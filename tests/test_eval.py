"""`rms-duck eval`: the JSONL loader, the runner on tiny data, and a small CLI run, twice."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from rms_duck.cli import main
from rms_duck.evaluation.loader import EvalDataError, load_conversations, node_id_for
from rms_duck.evaluation.runner import EvalSettings, run_eval

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
EXAMPLE = EXAMPLES / "eval_conversations.jsonl"
KEYS = {"budget", "ordering", "representation_policy", "category", "questions",
        "evidence_recall", "all_evidence_share", "mean_tokens_used"}


def write(tmp_path: Path, *records) -> Path:
    path = tmp_path / "data.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def conversation(**changes):
    record = {
        "conversation_id": "c1",
        "turns": [
            {"id": "t1", "session": "s1", "time": "2024-01-02T10:00:00Z", "speaker": "Ann",
             "text": "I adopted a greyhound called Pepper."},
            {"id": "t2", "session": "s1", "time": "2024-01-02T10:01:00Z", "speaker": "Bo",
             "text": "Nice, I prefer cats."},
        ],
        "questions": [{"id": "q1", "question": "What is the greyhound called?",
                       "answer": "Pepper", "category": "single_hop", "evidence": ["t1"]}],
    }
    record.update(changes)
    return record


def test_loader_reads_the_example():
    conversations = load_conversations(EXAMPLE)
    assert len(conversations) == 3
    questions = [q for c in conversations for q in c.questions]
    assert 10 <= len(questions) <= 25
    assert len({q.category for q in questions}) >= 3
    first = conversations[0]
    assert first.turns[0].node_id == node_id_for(first.conversation_id, first.turns[0].id)


@pytest.mark.parametrize("record, message", [
    pytest.param(conversation(questions=[{"id": "q", "question": "?", "evidence": ["t9"]}]),
                 "evidence 't9' names no turn of 'c1'", id="unknown-evidence"),
    pytest.param({"turns": [], "questions": []}, "a conversation needs conversation_id, turns "
                 "and questions, got keys 'turns', 'questions'; write one conversation per line",
                 id="no-id"),
    # A file of candidates was told only "field 'conversation_id' must be non-empty text, got
    # None", and a null id named no fix.
    pytest.param({"id": "n1", "score": 0.9, "content": "x"}, "got keys 'id', 'score', "
                 "'content'; write one conversation per line, {\"conversation_id\": \"c1\", "
                 "\"turns\": [...], \"questions\": [...]}, as docs/evaluation.md shows (a file "
                 "of candidates is rms-duck pack's input)", id="candidates-file"),
    pytest.param({"conversation_id": None, "turns": [], "questions": []},
                 "field 'conversation_id' must be non-empty text, got None; give it as a JSON "
                 "string", id="null-id"),
    pytest.param(conversation(turns="nope"), "field 'turns' must be a list, got 'nope'; give it "
                 "as a JSON array ([] for none)", id="turns"),
    pytest.param(conversation(turns=[{"id": "t1", "text": "a", "time": "yesterday"}],
                              questions=[]), "field 'time' must be ISO-8601", id="time"),
])
def test_loader_errors_name_the_line_and_field(tmp_path, record, message):
    with pytest.raises(EvalDataError, match="data.jsonl line 1") as info:
        load_conversations(write(tmp_path, record))
    assert message in str(info.value)


def test_loader_rejects_invalid_json(tmp_path):
    path = tmp_path / "data.jsonl"
    path.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(EvalDataError, match="line 1: not valid JSON"):
        load_conversations(path)


def test_runner_counts_packed_evidence(tmp_path):
    conversations = load_conversations(write(tmp_path, conversation()))
    settings = EvalSettings(budgets=(4096, 120), orderings=("score",),
                            policies=("highest_fit",))
    result = run_eval(conversations, settings=settings)
    rows = {(r["budget"], r["category"]): r for r in result.results}
    assert rows[(4096, "all")]["evidence_recall"] == 1.0
    assert rows[(4096, "single_hop")]["all_evidence_share"] == 1.0
    # 120 - 100 overhead leaves 20 tokens: not even the header fits.
    assert rows[(120, "all")]["evidence_recall"] == 0.0
    assert rows[(120, "all")]["mean_tokens_used"] == 0
    assert result.ranking[0]["evidence_ranked"] == 1.0


@pytest.mark.slow  # 3-9 s on a 2-core machine: the slow step runs it
def test_cli_small_run_is_deterministic(tmp_path, capsys):
    args = ["eval", str(EXAMPLE), "--budgets", "2048", "--orderings", "balanced",
            "--policies", "highest_fit,budget_fraction", "--limit", "5"]
    outputs = []
    for run in (1, 2):
        path = tmp_path / f"run{run}.json"
        assert main([*args, "--json", str(path)]) == 0
        outputs.append(json.loads(path.read_text(encoding="utf-8")))
    captured = capsys.readouterr()
    assert "eval [" not in captured.err  # progress bars only on a terminal
    assert "budget  ordering" in captured.out and "budget_fraction" in captured.out
    first, second = outputs
    assert first["results"] == second["results"] and first["ranking"] == second["ranking"]
    assert set(first["timings"]) >= {"rank_seconds", "pack_seconds", "total_seconds"}
    rows = first["results"]
    assert all(KEYS <= set(row) for row in rows)
    overall = [r for r in rows if r["category"] == "all"]
    assert [(r["budget"], r["ordering"], r["representation_policy"]) for r in overall] == [
        (2048, "balanced", "highest_fit"), (2048, "balanced", "budget_fraction")]
    assert all(r["questions"] == 5 for r in overall)
    assert all(0 < r["mean_tokens_used"] <= 2048 - 100 for r in overall)


def test_cli_rejects_unknown_ordering(capsys):
    assert main(["eval", str(EXAMPLE), "--orderings", "random", "--quiet"]) == 1
    assert "--orderings: unknown value 'random'" in capsys.readouterr().err


def test_cli_rejects_an_unknown_format_and_names_the_way_to_register_one(capsys):
    assert main(["eval", str(EXAMPLE), "--format", "plain", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert "--format: unknown context format 'plain'; use one of reader, auditable, " in err
    assert "--format-module" in err


def test_example_file_matches_its_generator():
    spec = importlib.util.spec_from_file_location(
        "make_eval_conversations", Path(__file__).parent / "make_eval_conversations.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.render() == EXAMPLE.read_text(encoding="utf-8")


# Slow: it ranks and packs a whole evaluation set under five reader variants (about 18 s).
@pytest.mark.slow
def test_the_framing_experiment_runs_and_restores_the_reader():
    """tests/framing_experiment.py (quoted in docs/evaluation.md) on the small dated set:
    removing framing keeps at least as much evidence, the shipped reader keeps at least as
    much as version 5's, 3's and 2's, and the reader's own date lines are back
    afterwards."""
    from rms_duck.formats import reader

    spec = importlib.util.spec_from_file_location(
        "framing_experiment", Path(__file__).parent / "framing_experiment.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    shipped = reader.ReaderFormat.date_lines
    questions = module.ranked(str(EXAMPLES / "dated_dialogue.jsonl"))
    assert len(questions) == 21
    shares = module.compare(questions, 512)
    assert list(shares) == ["as shipped", "reader@7", "reader@5", "reader@3", "ISO days",
                            "no times", "no dates"]
    assert all(0 < share <= 1 for share in shares.values())
    assert shares["as shipped"] >= shares["reader@7"] >= shares["reader@5"] \
        >= shares["reader@3"] >= shares["ISO days"]
    assert shares["no dates"] >= shares["reader@7"]
    assert reader.ReaderFormat.date_lines is shipped

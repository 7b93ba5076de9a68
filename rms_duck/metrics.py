"""RFC-0006 section 8 STR metrics for one bundle (sessions aggregate them in SQL)."""

from __future__ import annotations

from collections.abc import Sequence

from .records import IncludedRecord, Level


def str_value(score: float, tokens: int) -> float:
    """Signal-to-token ratio: composite score per token of the record's line."""
    return score / max(tokens, 1)


def bundle_metrics(included: Sequence[IncludedRecord], available: int) -> dict[str, float | None]:
    """session_STR_mean, session_STR_p10, budget_efficiency and budget_waste for one bundle.

    p10 interpolates linearly between order statistics, as DuckDB's quantile_cont does.
    """
    # One pass, str_value spelled out: it runs once per bundle, thousands of times a GROUP BY.
    ratios = []
    used = wasted = 0
    reference = Level.REFERENCE
    for r in included:
        tokens = r.tokens
        ratios.append(r.score / max(tokens, 1))
        used += tokens
        if r.representation is reference:
            wasted += tokens
    ratios.sort()
    denominator = available if available > 0 else None
    return {
        "str_mean": sum(ratios) / len(ratios) if ratios else None,
        "str_p10": _quantile(ratios, 0.10) if ratios else None,
        "budget_efficiency": used / denominator if denominator else None,
        "budget_waste": wasted / denominator if denominator else None,
    }


def _quantile(values: Sequence[float], q: float) -> float:
    position = (len(values) - 1) * q
    low = int(position)
    high = min(low + 1, len(values) - 1)
    return values[low] + (values[high] - values[low]) * (position - low)

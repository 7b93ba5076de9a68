"""Print evaluation results: a fixed-width table, and a progress bar on standard error."""

from __future__ import annotations

import sys
from typing import Any, TextIO

from .runner import EvalRun


def format_table(run: EvalRun) -> str:
    """One line per (budget, ordering, policy): overall evidence recall, share of questions
    with all evidence packed, mean tokens, then recall / all-evidence share per category."""
    overall = [r for r in run.results if r["category"] == "all"]
    categories = sorted({r["category"] for r in run.results} - {"all"})
    by_key = {(r["budget"], r["ordering"], r["representation_policy"], r["category"]): r
              for r in run.results}
    head = ["budget", "ordering", "policy", "questions", "evidence", "all-evid", "tokens",
            "text", "ceiling", "vs-ceil", *categories]
    lines = [head]
    for r in overall:
        key = (r["budget"], r["ordering"], r["representation_policy"])
        cells = [str(r["budget"]), r["ordering"], r["representation_policy"], str(r["questions"]),
                 _pct(r["evidence_recall"]), _pct(r["all_evidence_share"]),
                 f"{r['mean_tokens_used']:.0f}", _pct(r["record_text_share"]),
                 _pct(r["ceiling_all_evidence_share"]), _pct(r["all_evidence_vs_ceiling"])]
        for category in categories:
            row = by_key.get((*key, category))
            cells.append("-" if row is None else
                         f"{_pct(row['evidence_recall'])}/{_pct(row['all_evidence_share'])}")
        lines.append(cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    text = ["  ".join(cell.ljust(w) if i < 3 else cell.rjust(w)
                      for i, (cell, w) in enumerate(zip(line, widths, strict=False))).rstrip()
            for line in lines]
    text.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(text)


def format_categories(run: EvalRun) -> str:
    """Per (ordering, policy): one line per category, the share of questions with all their
    evidence packed at each budget (the headline figure, kind by kind)."""
    budgets = sorted({r["budget"] for r in run.results})
    settings = list(dict.fromkeys((r["ordering"], r["representation_policy"])
                                  for r in run.results))
    categories = ["all", *sorted({r["category"] for r in run.results} - {"all"})]
    by_key = {(r["ordering"], r["representation_policy"], r["category"], r["budget"]): r
              for r in run.results}
    blocks = []
    for ordering, policy in settings:
        head = [f"{ordering}/{policy}", "questions", *(f"{b // 1024}K" if b % 1024 == 0
                                                       else str(b) for b in budgets)]
        lines = [head]
        for category in categories:
            rows = [by_key.get((ordering, policy, category, b)) for b in budgets]
            count = next((str(r["questions"]) for r in rows if r is not None), "-")
            lines.append([category, count, *("-" if r is None else
                                             _pct(r["all_evidence_share"]) for r in rows)])
        widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
        blocks.append("\n".join("  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                                          for i, (cell, w) in enumerate(zip(line, widths,
                                                                            strict=True)))
                                for line in lines))
    return "all evidence packed, by kind of question and budget\n" + "\n\n".join(blocks)


def format_summary(run: EvalRun) -> str:
    """Ranking recall (evidence among the ranked candidates) and the timings."""
    rank = next((r for r in run.ranking if r["category"] == "all"), None)
    t = run.timings
    parts = []
    if rank is not None:
        parts.append(f"ranked: {_pct(rank['evidence_ranked'])} of {rank['evidence_turns']} "
                     f"evidence turns among the candidates of {rank['questions']} questions "
                     f"(all evidence ranked for {_pct(rank['all_evidence_ranked'])})")
    parts.append(f"time: {t['total_seconds']:.1f} s in all; ranking {t['rank_seconds']:.1f} s, "
                 f"{t['packs']} packs {t['pack_seconds']:.1f} s "
                 f"({1000 * t['pack_seconds'] / max(t['packs'], 1):.1f} ms each)")
    parts.append("evidence = share of evidence turns packed with their text; all-evid = share "
                 "of questions with all their evidence packed; text = record text (content + "
                 "speaker) share of tokens_used; ceiling = all-evid when plain `speaker: text` "
                 "lines fill the same room; vs-ceil = all-evid / ceiling; per category: "
                 "evidence/all-evid")
    return "\n".join(parts)


def _pct(value: float) -> str:
    return f"{100 * value:.1f}%"


class ProgressBar:
    """A one-line progress bar, redrawn in place on a terminal stream (stderr by default).

    Off a terminal (a log file, a pipe, CI) it draws nothing: redraws there are noise.
    """

    def __init__(self, label: str, *, stream: TextIO | None = None, width: int = 30) -> None:
        self.label, self.stream, self.width = label, stream or sys.stderr, width

    def __call__(self, done: int, total: int) -> None:
        if not is_terminal(self.stream):
            return
        filled = self.width * done // max(total, 1)
        bar = "#" * filled + "." * (self.width - filled)
        end = "\n" if done >= total else ""
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total}{end}")
        self.stream.flush()


def is_terminal(stream: TextIO) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


def results_json(run: EvalRun) -> dict[str, Any]:
    return run.to_json()

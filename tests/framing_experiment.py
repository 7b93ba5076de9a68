"""How much of the reader format's gap to the plain-lines ceiling is its date framing?

Ranks every question of an eval set once, as `rms-duck eval` does, then packs the same
candidates at one budget under reader-format variants that are experiments, not shipped:

  as shipped     speaker lines over each run of one speaker's records, and date lines
                 that open the line below them where that saves tokens (receipt version 8)
  reader@7       a year line and a '22 Aug' day line, each once per run, and time lines
                 only under a day whose records differ in time; '#' section and metadata
                 headings and record lines without a marker (receipt versions 6 and 7)
  reader@5       the same dates, with "- " record lines, bracketed section and metadata
                 lines and a 20-token header (the reader of receipt version 5)
  reader@3       a time line under every timed day, the 28-token header and the JSON
                 metadata line (the reader of receipt versions 3 and 4)
  ISO days       '2023-08-22' day lines and time lines (the reader of receipt version 2)
  no times       the year and day lines only
  no dates       no year, day or time lines at all

and prints all-evid / ceiling for each (docs/evaluation.md quotes a run). The ceiling packs
plain `speaker: text` lines with no framing at all, so "no dates" bounds what any dated
framing can reach. `--more-room 10,20,40` also packs the shipped reader with that many
more tokens of budget than the ceiling gets: how many tokens a framing would have to save
to close the gap. Usage:

    python tests/framing_experiment.py examples/hard_conversations.jsonl --budget 1024
"""

from __future__ import annotations

import argparse
from dataclasses import replace

from rms_duck.config import PackingConfig
from rms_duck.evaluation import runner
from rms_duck.evaluation.loader import load_conversations
from rms_duck.formats import reader
from rms_duck.formats.base import clear_render_memos
from rms_duck.packing.pipeline import pack_candidates
from rms_duck.records import TEXT_LEVELS

SHIPPED = reader.ReaderFormat.date_lines


def _no_times(self, view):
    return SHIPPED(self, view)[:2]


def _no_dates(self, view):
    return ()


# name: (context_format, the reader's date lines)
VARIANTS = {"as shipped": ("reader", SHIPPED), "reader@7": ("reader@7", SHIPPED),
            "reader@5": ("reader@5", SHIPPED),
            "reader@3": ("reader@3", SHIPPED),
            "ISO days": ("reader@2", SHIPPED), "no times": ("reader", _no_times),
            "no dates": ("reader", _no_dates)}


def ranked(path: str) -> list[tuple[set[str], list]]:
    """(evidence ids, ranked candidates) per question, ranked once by rms_candidates()."""
    out = []

    def keep(tallies, settings, question, evidence, candidates):
        out.append((set(evidence), candidates))

    real = runner._pack_all
    runner._pack_all = keep
    try:
        runner.run_eval(load_conversations(path), settings=runner.EvalSettings(
            budgets=(1024,), orderings=("balanced",), policies=("highest_fit",)))
    finally:
        runner._pack_all = real
    return out


def compare(questions: list[tuple[set[str], list]], budget: int) -> dict[str, float]:
    """all-evid / ceiling per variant, for questions ranked by ranked()."""
    config = PackingConfig(multipath_ordering="balanced", representation_policy="highest_fit")
    room = budget - config.overhead_tokens
    ceiling = [evidence <= runner.plain_lines_ceiling(candidates, room, config)
               for evidence, candidates in questions]
    out = {}
    try:
        for name, (context_format, date_lines) in VARIANTS.items():
            reader.ReaderFormat.date_lines = date_lines
            clear_render_memos()
            variant = replace(config, context_format=context_format)
            complete = 0
            for (evidence, candidates), fits in zip(questions, ceiling, strict=True):
                bundle = pack_candidates(candidates, budget=budget, config=variant)
                shown = {r.id for r in bundle.included if r.representation in TEXT_LEVELS}
                complete += fits and evidence <= shown
            out[name] = complete / max(sum(ceiling), 1)
    finally:
        reader.ReaderFormat.date_lines = SHIPPED
        clear_render_memos()
    return out


def with_more_room(questions: list[tuple[set[str], list]], budget: int,
                   extra: int) -> float:
    """all-evid / ceiling of the shipped reader given `extra` more tokens than the ceiling."""
    config = PackingConfig(multipath_ordering="balanced", representation_policy="highest_fit")
    room = budget - config.overhead_tokens
    complete = fitting = 0
    for evidence, candidates in questions:
        if not evidence <= runner.plain_lines_ceiling(candidates, room, config):
            continue
        fitting += 1
        bundle = pack_candidates(candidates, budget=budget + extra, config=config)
        complete += evidence <= {r.id for r in bundle.included
                                 if r.representation in TEXT_LEVELS}
    return complete / max(fitting, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("path")
    parser.add_argument("--budget", type=int, default=1024)
    parser.add_argument("--more-room", default="",
                        help="comma-separated extra tokens to give the shipped reader")
    args = parser.parse_args()
    questions = ranked(args.path)
    print(f"{len(questions)} questions, budget {args.budget}")
    for name, share in compare(questions, args.budget).items():
        print(f"{name:12s} all-evid / ceiling {share:.1%}")
    for extra in (int(v) for v in args.more_room.split(",") if v):
        share = with_more_room(questions, args.budget, extra)
        print(f"as shipped, {extra} more tokens: all-evid / ceiling {share:.1%}")


if __name__ == "__main__":
    main()

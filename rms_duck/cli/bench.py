"""`rms-duck bench`: packing speed by default, the RFC section 10 benchmarks with --rfc, or
the same bundles on 1 and 2 Dask workers against one DuckDB GROUP BY with --dask."""

from __future__ import annotations

import argparse
import importlib

from .argtypes import output_path, positive_float, positive_int, positive_ints


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rfc", action="store_true",
                        help="run the RFC-0006 section 10 benchmarks (estimate accuracy, "
                             "budget adherence, context quality)")
    parser.add_argument("--dask", action="store_true",
                        help="pack the same groups with one DuckDB GROUP BY and with "
                             "rms_duck.dask on 1 and 2 worker processes (needs rms-duck[dask])")
    parser.add_argument("--groups", type=positive_int, default=None,
                        help="--dask: groups to pack (default 2000; smoke 200)")
    parser.add_argument("--estimates", action="store_true",
                        help="Method 2 error per script on held-out CLDR and Faker text "
                             "(the docs/estimates.md table; needs babel and faker)")
    parser.add_argument("--store-cost", type=positive_int, metavar="N", default=None,
                        help="paired per-pack store time with 0 and with N stored receipts "
                             "(flat: ~1)")
    parser.add_argument("--db", default=None,
                        help="--store-cost: a DuckDB file to fill (default: two in-memory "
                             "databases)")
    parser.add_argument("--smoke", action="store_true", help="a fast, small run")
    parser.add_argument("--requests", type=positive_int, default=None,
                        help="--rfc: simulated retrieval requests (default 10000; smoke 200)")
    parser.add_argument("--seed", type=int, default=0, help="--rfc: random seed (default 0)")
    parser.add_argument("--json", metavar="PATH", type=output_path,
                        help="--rfc, --dask: also write the figures as JSON")
    parser.add_argument("--encoding", default=None,
                        help="--rfc: encoding the Method 2 estimate is measured and fitted "
                             "against (default o200k_base)")
    _speed_arguments(parser)


def _speed_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of the default speed bench (rms_duck/bench/perf.py)."""
    group = parser.add_argument_group("speed bench (without --rfc)")
    group.add_argument("--sizes", type=positive_ints,
                       help="candidate pool sizes (default 100,1000,10000)")
    group.add_argument("--budgets", type=positive_ints,
                       help="token budgets (default 2048,4096,8192,32768,131072)")
    group.add_argument("--repeats", type=positive_int,
                       help="paired repetitions per row (default 5)")
    group.add_argument("--e-cap", type=positive_float, metavar="SECONDS",
                       help="stop the RFC-literal packer (e) after this long (default 20; "
                            "a third of it at 10,000 candidates)")
    group.add_argument("--bulk", type=positive_ints, metavar="BUNDLES",
                       help="bundles one statement packs (default 10000,20000)")
    group.add_argument("--processes", type=positive_int,
                       help="processes for bulk costing (default 2)")
    group.add_argument("--only-targets", action="store_true", default=None,
                       help="measure only the issue-10 target rows (a few minutes)")
    group.add_argument("--clock", choices=("wall", "cpu"),
                       help="clock of the issue-10 target rows (default wall; cpu: this "
                            "process's CPU time, steadier on a loaded machine)")
    # bench.workload.TEXTS, written out so that starting the CLI does not import the bench
    group.add_argument("--text", choices=("notes", "dialogue"),
                       help="the candidates' texts (default notes: English-like invented "
                            "words; dialogue: two-speaker sessions in 16 languages and 10 "
                            "scripts, from the shipped seed sentences)")
    group.add_argument("--profile", action="store_true",
                       help="also print a cProfile of a cold and a warm pack (N=1000, 4K)")


def run(args: argparse.Namespace) -> int:
    # Imported lazily: each benchmark pulls in what only it needs.
    name = ("rfc" if args.rfc else "daskbench" if getattr(args, "dask", False)
            else "estimates" if getattr(args, "estimates", False)
            else "storecost" if getattr(args, "store_cost", None) else "perf")
    module = importlib.import_module(f"rms_duck.bench.{name}")
    return int(module.run(args) or 0)

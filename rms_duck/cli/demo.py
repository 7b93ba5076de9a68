"""`rms-duck demo`: load the sample agent memory, rank it in SQL, pack at 4,096 tokens, store."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

import pyarrow as pa

from ..bundle import MemoryBundle
from ..config import parse_config
from ..duck.api import pack
from ..duck.connection import connect
from ..duck.ranking import refresh_index
from ..packing.pipeline import _check_budget
from .tokenizer_options import add_tokenizer_arguments, check_encoding, tokenizer_config

NODE_COLUMNS = (
    "id", "namespace_id", "type", "content", "structured_value", "prose", "epistemic_type",
    "source_type", "lifecycle_state", "confidence", "salience", "pinned", "event_time",
    "valid_from", "valid_to", "created_at", "superseded_by", "speaker", "evidence_ids",
    "session_id", "session_position", "condition_state",
)
EDGE_COLUMNS = ("source_id", "target_id", "kind")
NODE_DEFAULTS = {"type": "note", "epistemic_type": "asserted", "source_type": "user_stated",
                 "lifecycle_state": "tentative", "confidence": 0.5, "salience": 0.5,
                 "pinned": False}


def examples_dir() -> Path:
    """The shipped examples/ folder (installed as the rms_duck.examples package)."""
    try:
        return Path(str(resources.files("rms_duck.examples")))
    except ModuleNotFoundError:
        # A source checkout on sys.path but not installed.
        return Path(__file__).resolve().parents[2] / "examples"


def load_memory(con, data: dict[str, Any]) -> int:
    """Insert the sample nodes and edges, all or none; rows already present are left alone."""
    nodes = []
    for node in data["nodes"]:
        node = {**NODE_DEFAULTS, **node}
        if node.get("structured_value") is not None:
            node["structured_value"] = json.dumps(node["structured_value"])
        nodes.append([node.get(col) for col in NODE_COLUMNS])
    edges = [[e[col] for col in EDGE_COLUMNS] for e in data["edges"]]
    tables = {"rms_nodes": (NODE_COLUMNS, nodes), "rms_edges": (EDGE_COLUMNS, edges)}
    scans = {table: _arrow(columns, rows) for table, (columns, rows) in tables.items()}
    before = con.execute("SELECT count(*) FROM rms_nodes").fetchall()[0][0]
    for table, scan in scans.items():
        if scan is not None:
            con.register(f"{table}_to_load", scan)
    try:
        con.execute("BEGIN TRANSACTION")
        try:
            for table, (columns, rows) in tables.items():
                _insert(con, table, columns, rows, scans[table] is not None)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    finally:
        for table, scan in scans.items():
            if scan is not None:
                con.unregister(f"{table}_to_load")
    return con.execute("SELECT count(*) FROM rms_nodes").fetchall()[0][0] - before


def _arrow(columns: tuple[str, ...], rows: list[list[Any]]) -> pa.Table | None:
    """The rows as one Arrow table, or None when there are none or a column mixes values
    Arrow cannot give one type (pinned 1 beside false, a UUID object beside text)."""
    if not rows:
        return None
    try:
        return pa.table({col: [row[i] for row in rows] for i, col in enumerate(columns)})
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None


def _insert(con, table: str, columns: tuple[str, ...], rows: list[list[Any]],
            scanned: bool) -> None:
    """One INSERT over the registered Arrow table: executemany inserts row by row, about
    30 ms a row into rms_nodes (its generated column is bound per statement). The INSERT
    casts each column to the table's type. Rows Arrow could not type go row by row, where
    DuckDB casts each value as it comes."""
    names = ", ".join(columns)
    if scanned:
        con.execute(f"INSERT INTO {table} ({names}) SELECT {names} FROM {table}_to_load "
                    "ON CONFLICT DO NOTHING").fetchall()
    elif rows:
        marks = ", ".join("?" for _ in columns)
        con.executemany(f"INSERT INTO {table} ({names}) VALUES ({marks}) "
                        "ON CONFLICT DO NOTHING", rows)


def run_demo(db: str, *, budget: int = 4096, context_format: str = "reader",
             out: TextIO, tokenizer: dict[str, str] | None = None) -> MemoryBundle:
    folder = examples_dir()
    data = json.loads((folder / "agent_memory.json").read_text(encoding="utf-8"))
    ranking = (folder / "demo_ranking.sql").read_text(encoding="utf-8")
    # A bad budget, model or encoding fails here, before the file is made and filled.
    config = parse_config({"context_format": context_format, "query": data["question"],
                           "reference_time": data["reference_time"], **(tokenizer or {})})
    _check_budget(budget)
    check_encoding(config)
    con = connect(db)
    try:
        added = load_memory(con, data)
        refresh_index(con)  # so rms_candidates() works on the file the demo leaves behind
        bundle = pack(con, ranking, budget=budget, config=config,
                      params=[data["question"], "maya"], session_id="demo")
        stored = con.execute("SELECT count(*) FROM rms_receipts").fetchall()[0][0]
    finally:
        con.close()
    print(bundle.render(), file=out)
    print(summary(bundle, db=db, added=added, stored=stored, question=data["question"]), file=out)
    return bundle


def summary(bundle: MemoryBundle, *, db: str, added: int, stored: int, question: str) -> str:
    reasons = Counter(record.reason.value for record in bundle.excluded)
    excluded = ", ".join(f"{name} {n}" for name, n in sorted(reasons.items())) or "none"
    return "\n".join([
        "-" * 72,
        f"question:  {question}",
        f"tokens:    {bundle.tokens_used} used of {bundle.context_budget} "
        f"(available after {bundle.config.overhead_tokens} overhead: {bundle.available}; "
        f"encoding {bundle.config.encoding})",
        f"records:   {len(bundle.included)} included, {len(bundle.excluded)} excluded ({excluded}) "
        f"of {len(bundle.included) + len(bundle.excluded)} ranked candidates "
        "(examples/demo_ranking.sql leaves archived nodes out)",
        f"flags:     {', '.join(bundle.flags) or 'none'}",
        # Why the context holds no record (--budget 0, say): it showed the flag alone.
        *(f"warning:   {warning}" for warning in bundle.warnings),
        f"stored:    receipt {bundle.receipt_id} in {db} "
        f"({stored} receipts; {added} sample nodes added this run)",
    ])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--db", default="rms.duckdb", help="DuckDB file (default: rms.duckdb)")
    parser.add_argument("--budget", type=int, default=4096, help="token budget (default 4096)")
    parser.add_argument("--format", default="reader", choices=("reader", "auditable", "compact"))
    add_tokenizer_arguments(parser)


def run(args: argparse.Namespace) -> int:
    run_demo(args.db, budget=args.budget, context_format=args.format, out=sys.stdout,
             tokenizer=tokenizer_config(args))
    return 0

"""The demo's loader stores what row-by-row inserts stored, all or nothing, in one Arrow scan
when the columns allow it."""

from __future__ import annotations

import json
import uuid

import duckdb
import pytest

import rms_duck
from rms_duck.cli.demo import EDGE_COLUMNS, NODE_COLUMNS, examples_dir, load_memory

A = "00000000-0000-4000-8000-00000000000a"
B = "00000000-0000-4000-8000-00000000000b"


def _rowwise(con, data) -> None:
    """What load_memory did before it used Arrow: one INSERT per row, DuckDB casting each."""
    from rms_duck.cli.demo import NODE_DEFAULTS

    marks = ", ".join("?" for _ in NODE_COLUMNS)
    for node in data["nodes"]:
        node = {**NODE_DEFAULTS, **node}
        if node.get("structured_value") is not None:
            node["structured_value"] = json.dumps(node["structured_value"])
        con.execute(f"INSERT INTO rms_nodes ({', '.join(NODE_COLUMNS)}) VALUES ({marks}) "
                    "ON CONFLICT DO NOTHING", [node.get(col) for col in NODE_COLUMNS])
    for edge in data["edges"]:
        con.execute("INSERT INTO rms_edges (source_id, target_id, kind) VALUES (?, ?, ?) "
                    "ON CONFLICT DO NOTHING", [edge[col] for col in EDGE_COLUMNS])


def _stored(con) -> tuple[list, list]:
    nodes = con.execute("SELECT * EXCLUDE (created_at) FROM rms_nodes ORDER BY id").fetchall()
    edges = con.execute("SELECT source_id, target_id, kind FROM rms_edges ORDER BY ALL"
                        ).fetchall()
    return nodes, edges


T = "2024-05-01T10:00:00+00:00"


def node(node_id: str, **fields) -> dict:
    return {"id": node_id, "created_at": T, **fields}


SHAPES = {
    # A review's cases: Arrow cannot type these columns, DuckDB casts each value.
    "pinned 1 beside the default false": {
        "nodes": [node(A, content="x", pinned=1), node(B, content="y")],
        "edges": [{"source_id": A, "target_id": B, "kind": "SUPPORTS"}]},
    "UUID objects in an edge": {
        "nodes": [node(A, content="x"), node(B, content="y")],
        "edges": [{"source_id": uuid.UUID(A), "target_id": uuid.UUID(B), "kind": "SUPPORTS"}]},
    "confidence as text and as a number": {
        "nodes": [node(A, content="x", confidence="0.7"),
                  node(B, content="y", confidence=0.2)], "edges": []},
    "content as a number and as text": {
        "nodes": [node(A, content=5), node(B, content="y")], "edges": []},
    # Shapes Arrow types: the fast path.
    "structured values, lists and times": {
        "nodes": [node(A, content="x", structured_value={"k": [1, 2]}, evidence_ids=[B],
                       event_time="2024-05-01T10:00:00+00:00"),
                  node(B, content="y", structured_value=None, evidence_ids=[],
                       event_time=None)],
        "edges": [{"source_id": A, "target_id": B, "kind": "CONTRADICTS"}]},
    "no edges": {"nodes": [node(A, content="x")], "edges": []},
    "no nodes": {"nodes": [], "edges": []},
}


@pytest.mark.parametrize("data", SHAPES.values(), ids=SHAPES.keys())
def test_the_loader_stores_what_row_by_row_inserts_store(data):
    fast, slow = rms_duck.connect(), rms_duck.connect()
    try:
        assert load_memory(fast, data) == len(data["nodes"])
        _rowwise(slow, data)
        assert _stored(fast) == _stored(slow)
        assert load_memory(fast, data) == 0  # already there: left alone
    finally:
        fast.close()
        slow.close()


def test_the_shipped_memory_loads_as_row_by_row_inserts_load_it():
    data = json.loads((examples_dir() / "agent_memory.json").read_text())
    fast, slow = rms_duck.connect(), rms_duck.connect()
    try:
        assert load_memory(fast, data) == len(data["nodes"]) > 100
        _rowwise(slow, data)
        assert _stored(fast) == _stored(slow)
    finally:
        fast.close()
        slow.close()


def test_a_bad_row_stores_nothing_and_names_the_check():
    data = {"nodes": [node(A, content="x"), node(B, content="y", type="gadget")],
            "edges": []}
    con = rms_duck.connect()
    try:
        with pytest.raises(duckdb.ConstraintException, match="CHECK constraint.*type"):
            load_memory(con, data)
        assert con.execute("SELECT count(*) FROM rms_nodes").fetchall() == [(0,)]
        # and the connection is usable: the failed load's transaction was rolled back
        assert load_memory(con, {"nodes": [node(A, content="x")], "edges": []}) == 1
    finally:
        con.close()


@pytest.mark.parametrize(("budget", "reason"), [
    (0, "budget 0 is not a positive number of tokens"),
    (110, "none of 103 candidates was packed"),
])
def test_the_demo_summary_says_why_a_context_holds_no_record(tmp_path, budget, reason):
    # `rms-duck demo --budget 0` printed an empty context and "flags: BUDGET_ERROR" alone;
    # the bundle's warning says why and what to pass.
    import io

    from rms_duck.cli.demo import run_demo

    out = io.StringIO()
    bundle = run_demo(str(tmp_path / "rms.duckdb"), budget=budget, out=out)
    assert bundle.warnings
    assert f"warning:   {bundle.warnings[0]}\n" in out.getvalue()
    assert reason in bundle.warnings[0]

"""`rms-duck serve --db PATH` over stdio, driven by the official MCP SDK's client."""

from __future__ import annotations

import asyncio
import sys

import pytest

mcp = pytest.importorskip("mcp")

NOTES = ["The Heron cut-over moved to the weekend of 2026-12-19.",
         "Rollback plan: keep the old Heron cluster read-only for 48 hours.",
         "The canteen serves lasagne on Fridays."]


async def _session(db: str) -> dict:
    params = mcp.StdioServerParameters(command=sys.executable,
                                       args=["-m", "rms_duck", "serve", "--db", db])
    out = {}
    async with mcp.Client(params) as client:
        out["tools"] = sorted(t.name for t in (await client.list_tools()).tools)
        call = client.call_tool
        out["candidates"] = await call("pack_candidates", {
            "candidates": [{"id": f"n{i}", "score": 0.9 - i / 10, "content": text}
                           for i, text in enumerate(NOTES)],
            "budget": 300, "config": {"min_score": 0.75}})
        out["query"] = await call("pack_query", {
            "sql": "SELECT id, score, content FROM (VALUES ('q1', 0.8, 'from a query')) "
                   "AS t(id, score, content)", "budget": 200, "store": False})
        out["rejected"] = await call("pack_query", {"sql": "DROP TABLE rms_nodes",
                                                    "budget": 200})
        out["rank"] = await call("rank_and_pack", {"question": "When is the Heron cut-over?",
                                                   "budget": 400})
        rid = out["candidates"].structured_content["receipt_id"]
        out["explain"] = await call("explain", {"receipt_id": rid})
        out["replay"] = await call("replay", {"receipt_id": rid})
        out["verify"] = await call("verify", {})
    return out


@pytest.mark.slow
def test_mcp_client_packs_explains_verifies_and_replays(tmp_path):
    import rms_duck

    db = str(tmp_path / "agent.duckdb")
    con = rms_duck.connect(db)
    for i, text in enumerate(NOTES):
        con.execute("INSERT INTO rms_nodes (id, content) VALUES (?, ?)",
                    [f"00000000-0000-0000-0000-00000000000{i}", text])
    con.close()  # one writer per file: the server opens it next
    out = asyncio.run(asyncio.wait_for(_session(db), timeout=300))
    assert out["tools"] == ["explain", "pack_candidates", "pack_query", "rank_and_pack",
                            "replay", "verify"]
    packed = out["candidates"].structured_content
    assert packed["included"][0]["id"] == "n0" and packed["receipt_id"]
    assert [(e["id"], e["reason"]) for e in packed["excluded"]] == [
        ("n2", "BELOW_MIN_SCORE")]
    assert "from a query" in out["query"].structured_content["context"]
    assert out["query"].structured_content["receipt_id"] is None
    assert out["rejected"].is_error and "DROP statement is not allowed" in str(out["rejected"])
    ranked = out["rank"].structured_content
    # The lexical index was never built: the server refreshed it rather than rank on nothing.
    assert len(ranked["included"]) >= 2 and "Heron cut-over" in ranked["context"]
    decided = out["explain"].structured_content["candidates"]
    assert {d["node_id"]: d["decision"] for d in decided} == {
        "n0": "included", "n1": "included", "n2": "excluded"}
    assert out["replay"].structured_content["identical"] is True
    assert out["verify"].structured_content == {"ok": True, "problems": []}


async def _errors(db: str) -> dict:
    from rms_duck.mcpserver import build_server

    out = {}
    async with mcp.Client(build_server(db)) as client:
        call = client.call_tool
        out["k"] = await call("rank_and_pack", {"question": "heron", "budget": 300, "k": -1})
        out["params"] = await call("pack_query", {
            "sql": "SELECT id, score, content FROM (VALUES ('a', 0.5, 'x')) "
                   "AS t(id, score, content) WHERE 1 = ?", "budget": 300})
        out["unknown"] = await call("pack_query", {"sql": "SELECT * FROM memories",
                                                   "budget": 300})
        out["surrogate"] = await call("rank_and_pack", {"question": "heron \ud800",
                                                        "budget": 300})
        out["true k"] = await call("rank_and_pack", {"question": "heron", "budget": 300,
                                                     "k": True})
        out["true budget"] = await call("pack_candidates", {
            "candidates": [{"id": "a", "score": 0.5, "content": "x"}], "budget": True})
        out["float budget"] = await call("pack_query", {
            "sql": "SELECT 'a' AS id, 0.5 AS score, 'x' AS content", "budget": 300.0,
            "store": False})
        out["binder"] = await call("pack_query", {
            "sql": "SELECT id, score, body AS content FROM (VALUES ('a', 0.5, 'x')) "
                   "AS t(id, score, content)", "budget": 300})
    return out


def test_tool_errors_tell_the_agent_what_to_fix(tmp_path):
    # In process: the SDK's client drives the server object directly.
    out = asyncio.run(asyncio.wait_for(_errors(str(tmp_path / "agent.duckdb")), timeout=120))
    # The SDK took JSON true as the integer 1: {"budget": true} packed into 1 token and
    # {"k": true} ranked one candidate, past the server's own check.
    for key, name in (("true k", "k"), ("true budget", "budget")):
        text = out[key].content[0].text
        assert out[key].is_error and f"\n{name}\n" in text, text
        assert "must be a whole number, got true (JSON true and false are not numbers)" in text
    assert not out["float budget"].is_error  # 300.0 is still 300
    assert out["k"].is_error and "ConfigError: k must be a whole number" in str(out["k"])
    # A missing ? value is named by params, not left to DuckDB's "Values were not provided".
    assert out["params"].is_error and "ConfigError: params gives 0 value(s) [], but the " \
        "ranking query has 1 ? placeholder(s)" in str(out["params"])
    # DuckDB's own message, not the SDK's bare "Error executing tool".
    assert out["binder"].is_error and "DuckDB BinderException" in str(out["binder"])
    assert '"body" not found' in str(out["binder"])
    # An agent has no DataFrame to register: it is told where the memory is instead.
    unknown = str(out["unknown"])
    assert out["unknown"].is_error and "'memories' is not a table, view or CTE" in unknown
    assert "rms_candidates(question)" in unknown and "con.register" not in unknown
    # DuckDB's "Python Conversion Failure: cannot encode str as UTF-8" named no argument.
    assert out["surrogate"].is_error
    text = out["surrogate"].content[0].text
    assert "ConfigError: question holds a lone surrogate ('\\ud800'" in text


async def _limited(db: str) -> dict:
    from rms_duck.mcpserver import build_server

    out = {}
    async with mcp.Client(build_server(db, query_timeout=0.3, max_rows=5)) as client:
        call = client.call_tool
        out["slow"] = await call("pack_query", {
            "sql": "SELECT 'a' AS id, 0.5 AS score, CAST(sum(i) AS VARCHAR) AS content "
                   "FROM range(100000000000) t(i)", "budget": 300, "store": False})
        out["rows"] = await call("pack_query", {
            "sql": "SELECT 'x' || i AS id, 0.5 AS score, 'c' AS content FROM range(100) t(i)",
            "budget": 300, "store": False})
    return out


def test_an_agents_ranking_query_cannot_hold_the_server(tmp_path):
    """Every tool call waits on one lock, and pack_query ran an agent's query without a
    limit: one slow query held the server for every other agent."""
    from rms_duck import mcpserver

    assert 0 < mcpserver.QUERY_TIMEOUT <= 60 and mcpserver.MAX_ROWS > 0
    out = asyncio.run(asyncio.wait_for(_limited(str(tmp_path / "agent.duckdb")), timeout=300))
    assert out["slow"].is_error and "QueryLimitError" in str(out["slow"])
    assert "timeout=0.3 s" in str(out["slow"])
    assert out["rows"].is_error and "more than max_rows=5 rows" in str(out["rows"])


async def _read_only(db: str) -> dict:
    from rms_duck.mcpserver import build_server

    out = {}
    async with mcp.Client(build_server(db, read_only=True)) as client:
        out["rank"] = await client.call_tool("rank_and_pack", {"question": "heron cut-over",
                                                               "budget": 300})
        # The fix the error gives works: the same ranking on the index as it is.
        out["stale_ok"] = await client.call_tool("pack_query", {
            "sql": "SELECT * FROM rms_candidates(?, ?, ?, stale_ok := true)",
            "params": ["heron cut-over", None, 50], "budget": 300})
        # An agent cannot know the server stores nothing: its chain and session are
        # dropped, not refused as rms_duck.pack(store=False) refuses them.
        out["labelled"] = await client.call_tool("pack_candidates", {
            "candidates": [{"id": "n1", "score": 0.5, "content": NOTES[0]}], "budget": 300,
            "namespace": "ops", "session_id": "s1"})
    return out


def test_a_read_only_server_on_a_stale_index_gives_the_agent_a_fix_it_can_use(tmp_path):
    """It passed on DuckDB's fixes, run rms_duck.refresh_index(con) or pass stale_ok := true,
    neither of which an agent can do through rank_and_pack."""
    import rms_duck

    db = str(tmp_path / "agent.duckdb")
    con = rms_duck.connect(db)
    rms_duck.pack(con, "SELECT id::VARCHAR AS id, 0.5 AS score, content FROM rms_nodes",
                  budget=300)  # indexes nothing yet: no nodes
    for i, text in enumerate(NOTES):
        con.execute("INSERT INTO rms_nodes (id, content) VALUES (?, ?)",
                    [f"00000000-0000-0000-0000-00000000000{i}", text])
    con.close()
    out = asyncio.run(asyncio.wait_for(_read_only(db), timeout=120))
    message = str(out["rank"])
    assert out["rank"].is_error
    assert "the lexical index is out of date (3 of 3 nodes not indexed" in message
    assert "this server is --read-only" in message and "without --read-only" in message
    assert "stale_ok := true" in message and "pack_query" in message
    assert "refresh_index(con)" not in message
    assert not out["stale_ok"].is_error
    assert out["stale_ok"].structured_content["flags"] == ["NO_CANDIDATES"]
    assert not out["labelled"].is_error, out["labelled"]
    assert out["labelled"].structured_content["receipt_id"] is None


async def _replay_with(db: str, extra: list[str], receipt_id: str,
                       config: dict | None = None) -> dict:
    """A server started with `extra` replays the receipt, then packs unstored with `config`
    (by default counting with the encoding t-serve)."""
    params = mcp.StdioServerParameters(command=sys.executable,
                                       args=["-m", "rms_duck", "serve", "--db", db, *extra])
    async with mcp.Client(params) as client:
        return {"replay": await client.call_tool("replay", {"receipt_id": receipt_id}),
                "pack": await client.call_tool("pack_candidates", {
                    "candidates": [{"id": "a", "score": 0.5, "content": NOTES[0]}],
                    "budget": 300, "config": config or {"encoding": "t-serve"},
                    "store": False})}


@pytest.mark.slow  # two server processes
def test_serve_registers_a_tokenizer_file_for_replay_and_packing(tmp_path):
    """A receipt counted with a registered tokenizer could not be replayed over MCP: the
    error said to pass --tokenizer-file NAME PATH SHA256, which serve did not accept."""
    pytest.importorskip("tokenizers")
    import rms_duck
    from rms_duck.tokens import encodings

    from .hf_tokenizers import save

    path, digest = save("additive", tmp_path)
    rms_duck.register_tokenizer_file("t-serve", path, sha256=digest)
    db = str(tmp_path / "agent.duckdb")
    con = rms_duck.connect(db)
    try:
        bundle = rms_duck.pack(con, "SELECT 'a' AS id, 0.5 AS score, 'hello there' AS content",
                               budget=300, config={"encoding": "t-serve"})
    finally:
        con.close()
        encodings._HF_FILES.pop("t-serve", None)
    without = asyncio.run(asyncio.wait_for(_replay_with(db, [], bundle.receipt_id), 120))
    assert without["replay"].is_error and "--tokenizer-file" in str(without["replay"])
    flag = ["--tokenizer-file", "t-serve", str(path), digest]
    out = asyncio.run(asyncio.wait_for(_replay_with(db, flag, bundle.receipt_id), 120))
    assert not out["replay"].is_error, str(out["replay"])
    assert out["replay"].structured_content["identical"] is True
    assert not out["pack"].is_error and out["pack"].structured_content["tokens_used"] > 0


@pytest.mark.slow  # two server processes
def test_serve_imports_a_format_module_for_replay_and_packing(tmp_path):
    """A receipt packed with a custom format replays over MCP once serve imports the module
    that registers it (--format-module), and agents can pack with that format."""
    import pyarrow as pa

    import rms_duck
    from rms_duck.formats import FORMATS

    from .test_format_module_flag import FORMAT_MODULE

    (tmp_path / "quoted_formats.py").write_text(FORMAT_MODULE)
    exec(compile(FORMAT_MODULE, "quoted_formats", "exec"), {})  # registers quoted_cli here
    db = str(tmp_path / "agent.duckdb")
    con = rms_duck.connect(db)
    try:
        bundle = rms_duck.pack(con, pa.Table.from_pylist(
            [{"id": "a", "score": 0.5, "content": NOTES[1]}]), budget=300,
            config={"context_format": "quoted_cli"})
    finally:
        con.close()
        FORMATS.pop("quoted_cli")
    quoted = {"context_format": "quoted_cli"}
    without = asyncio.run(asyncio.wait_for(_replay_with(db, [], bundle.receipt_id, quoted),
                                           120))
    assert without["replay"].is_error and "--format-module" in str(without["replay"])
    flag = ["--format-module", str(tmp_path / "quoted_formats.py")]
    out = asyncio.run(asyncio.wait_for(_replay_with(db, flag, bundle.receipt_id, quoted), 120))
    assert not out["replay"].is_error, str(out["replay"])
    assert out["replay"].structured_content["identical"] is True
    packed = out["pack"].structured_content
    assert not out["pack"].is_error and packed["context"].startswith("Quoted lines")

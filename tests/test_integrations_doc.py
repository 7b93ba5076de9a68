"""docs/integrations.md stays true: its python blocks run, in order, in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

DOC = Path(__file__).resolve().parent.parent / "docs" / "integrations.md"


def test_every_python_block_runs(tmp_path, monkeypatch, capsys):
    text = DOC.read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    assert len(blocks) >= 6
    monkeypatch.chdir(tmp_path)  # the blocks write memory.duckdb here
    namespace: dict = {"__name__": "integrations_doc"}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{DOC.name} python block {i + 1}", "exec"), namespace)
    out = capsys.readouterr().out
    assert "Heron cut-over" in out
    shown = re.search(r"print\(repr\(bundle\)\)  # (<MemoryBundle [^,]+, [^,]+, [^,]+),", text)
    assert shown and shown.group(1) in out  # the repr the page shows is the one printed


def test_the_mcp_tool_table_matches_the_server():
    text = DOC.read_text(encoding="utf-8")
    from rms_duck import mcpserver

    source = Path(mcpserver.__file__).read_text(encoding="utf-8")
    tools = re.findall(r"@guarded\n    def (\w+)\(", source)
    assert tools and all(f"| `{tool}(" in text for tool in tools)


def test_the_mcp_client_configuration_names_the_database_by_an_absolute_path(tmp_path):
    """The example gave --db memory.duckdb; a client such as Claude Desktop starts the
    server in a working directory of its own, so the agent's memory went to another file.
    The server, started elsewhere as the example starts it, opens the file named."""
    import asyncio
    import json
    import sys

    import pytest

    mcp = pytest.importorskip("mcp")
    block = re.search(r"```json\n(\{\"mcpServers\".*?)```", DOC.read_text(encoding="utf-8"),
                      re.DOTALL)
    assert block
    server = json.loads(block.group(1))["mcpServers"]["memory"]
    args = server["args"]
    assert server["command"] == "rms-duck" and args[:2] == ["serve", "--db"]
    assert Path(args[2]).is_absolute(), args[2]

    db = tmp_path / "memory.duckdb"
    elsewhere = tmp_path / "client-cwd"
    elsewhere.mkdir()

    async def session() -> None:
        params = mcp.StdioServerParameters(
            command=sys.executable, args=["-m", "rms_duck", *args[:2], str(db)],
            cwd=str(elsewhere))
        async with mcp.Client(params) as client:
            done = await client.call_tool("pack_candidates", {
                "candidates": [{"id": "a", "score": 0.5, "content": "hello"}], "budget": 300})
            assert not done.is_error

    asyncio.run(asyncio.wait_for(session(), timeout=120))
    assert db.exists() and list(elsewhere.iterdir()) == []


def test_the_shell_section_names_every_key_rms_duck_pack_prints():
    # It listed eleven keys; the object also holds conflicts, context_references and
    # context_guidance.
    import rms_duck
    from rms_duck.cli.pack import bundle_json

    text = DOC.read_text(encoding="utf-8")
    listed = re.search(r"It prints the bundle as one\nJSON object: (.*?`)\.", text, re.S)
    assert listed
    named = re.findall(r"`(\w+)`", listed.group(1))
    printed = bundle_json(rms_duck.pack_candidates(
        [{"id": "n1", "score": 0.9, "content": "Heron cut-over is on 2026-12-19"}],
        budget=300))
    assert sorted(named) == sorted(printed)

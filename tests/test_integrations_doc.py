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

"""README's SQL reference lists every user-facing function and macro that register() adds."""

from __future__ import annotations

from pathlib import Path

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")


def _reference_section() -> str:
    start = README.index("## SQL reference")
    end = README.find("\n## ", start + 1)
    return README[start:end if end != -1 else None]


def test_every_macro_is_documented_with_a_comment(con):
    names = {row[0] for row in con.execute(
        "SELECT DISTINCT function_name FROM duckdb_functions() "
        "WHERE (function_name LIKE 'rms\\_%' ESCAPE '\\' OR function_name = 'pack_context') "
        "AND function_type IN ('macro', 'table_macro')").fetchall()}
    assert "pack_context" in names
    section = _reference_section()
    missing = sorted(name for name in names if f"`{name}" not in section)
    assert not missing, f"README SQL reference lacks {missing}"
    undocumented = [row[0] for row in con.execute(
        "SELECT function_name FROM duckdb_functions() "
        "WHERE function_type IN ('macro', 'table_macro') "
        "AND (function_name LIKE 'rms\\_%' ESCAPE '\\' OR function_name = 'pack_context') "
        "AND (comment IS NULL OR comment = '')").fetchall()]
    assert not undocumented, f"macros without COMMENT: {undocumented}"


def test_readme_test_command_is_what_ci_runs():
    ci = (Path(__file__).parent.parent / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -e '.[test]' && python -m pytest -q" in README
    assert "python -m pytest -q" in ci and "pip install --quiet -e '.[test]'" in ci

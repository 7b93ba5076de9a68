"""The core stands alone: importing it, and packing with it, loads neither duckdb nor sqlglot."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "rms_duck"

# Layers, bottom up. A module may import from its own layer or any lower one, never higher.
LAYERS = [
    {"errors", "records", "escape", "sha", "timefmt", "unfrozen"},
    {"tokens"},
    {"config", "candidates", "dictrows", "columnar", "formats"},
    {"bundle", "metrics", "receipts"},
    {"packing"},
    {"dask"},
    {"duck"},
    {"audit", "evaluation"},
    {"cli", "dbt", "mcpserver"},  # entry points: the shell, dbt-duckdb, MCP agents
    {"bench"},
]
LAYER_OF = {name: i for i, layer in enumerate(LAYERS) for name in layer}


def _run(code: str) -> str:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.parametrize("statement", [
    "import rms_duck",
    "import rms_duck.packing, rms_duck.tokens, rms_duck.formats",
    "import rms_duck; rms_duck.pack_candidates([{'id': 'a', 'score': 0.5, 'content': 'x'}],"
    " budget=300)",
])
def test_core_loads_no_database_or_sql_parser(statement):
    loaded = _run(f"{statement}\nimport sys\n"
                  "print(sorted(m for m in ('duckdb', 'sqlglot') if m in sys.modules))")
    assert loaded == "[]"


def test_the_adapter_loads_on_first_use():
    assert _run("import rms_duck, sys; rms_duck.connect; print('duckdb' in sys.modules)") == "True"


def test_unknown_attribute_is_an_attribute_error():
    import rms_duck
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        rms_duck.nope  # noqa: B018


@pytest.mark.parametrize("dotted", [
    "rms_duck.audit.explain.explain",  # README's auditor section names it so
    "rms_duck.duck.ranking.RankingWeights",
    "rms_duck.packing.batches.output_schema",
    "rms_duck.packing.parallel.one_process",
    "rms_duck.tokens.counter.LineCounter",
    "rms_duck.formats.register_format",
    "rms_duck.errors.RmsWarning",
    "rms_duck.dask.pack_groups",
])
def test_the_dotted_names_of_the_docs_resolve_after_a_plain_import(dotted):
    # `import rms_duck` then rms_duck.audit.explain.explain(con, id) raised AttributeError:
    # module 'rms_duck' has no attribute 'audit', unless something had imported it first.
    assert _run(f"import rms_duck\nprint(callable({dotted}))") == "True"


def test_an_unknown_submodule_is_an_attribute_error():
    import rms_duck
    with pytest.raises(AttributeError, match="module 'rms_duck.audit' has no attribute 'nope'"):
        rms_duck.audit.nope  # noqa: B018
    with pytest.raises(AttributeError, match="module 'rms_duck' has no attribute '_nope'"):
        rms_duck._nope  # noqa: B018
    assert not hasattr(rms_duck.packing, "nope")


def _top_level(path: Path) -> str:
    rel = path.relative_to(PACKAGE).with_suffix("")
    return rel.parts[0]


def _imported_top_levels(path: Path) -> set[str]:
    """rms_duck subpackages/modules this file imports at module level (not inside functions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts[:-1]
    found = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package_parts[: len(package_parts) - (node.level - 1)])
                target = base + (node.module.split(".") if node.module else [])
            else:
                target = (node.module or "").split(".")
            if target and target[0] == "rms_duck" and len(target) > 1:
                found.add(target[1])
            elif target == ["rms_duck"]:
                found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "rms_duck" and len(parts) > 1:
                    found.add(parts[1])
    return found


def test_imports_point_one_way():
    backwards = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "__init__.py" and path.parent == PACKAGE:
            continue  # the lazy export table names every layer on purpose
        own = _top_level(path) if path.parent != PACKAGE else path.stem
        if own not in LAYER_OF or own == "__main__":
            continue
        for target in _imported_top_levels(path):
            if target in LAYER_OF and LAYER_OF[target] > LAYER_OF[own]:
                backwards.append(f"{path.relative_to(PACKAGE)} imports {target}")
    assert not backwards, backwards


def test_every_top_level_module_has_a_layer():
    names = {p.stem for p in PACKAGE.glob("*.py")} | {p.name for p in PACKAGE.iterdir()
                                                      if (p / "__init__.py").exists()}
    names -= {"__init__", "__main__"}
    assert names <= set(LAYER_OF), sorted(names - set(LAYER_OF))

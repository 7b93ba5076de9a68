"""README.md and docs/*.md stay true: examples run with their printed output, every name they
mention exists, and the generated reference tables match the code.

`python -m pytest tests/test_docs.py --update-golden` rewrites the printed outputs, the format
examples and the SQL macro table from the current code.
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import inspect
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import rms_duck

ROOT = Path(__file__).parent.parent
README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
PAGES = [README, *DOCS]


# DuckDB draws a progress bar on stdout when a query runs longer than 2 s, as one may on a
# loaded machine. Printed outputs are compared byte for byte, so these runs switch it off.
_QUIET_DUCKDB = """
import duckdb as _duckdb
_connect = _duckdb.connect
def _quiet_connect(*args, **kwargs):
    con = _connect(*args, **kwargs)
    con.execute("SET enable_progress_bar = false")  # cursors inherit it
    return con
_duckdb.connect = _quiet_connect
"""


def run_python(code: str, *, cwd: Path, args: tuple[str, ...] = (),
               stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter; fail the test with its stderr when it fails."""
    result = subprocess.run([sys.executable, "-c", _QUIET_DUCKDB + code, *args], cwd=cwd,
                            input=stdin, capture_output=True, text=True, encoding="utf-8",
                            timeout=600)
    assert result.returncode == 0, result.stderr
    return result


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return run_python("import sys\nfrom rms_duck.cli import main\n"
                      "raise SystemExit(main(sys.argv[1:]))", cwd=cwd, args=args)


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def section(text: str, heading: str) -> str:
    """The text from `heading` to the next heading of the same or a higher level."""
    start = text.index(heading)
    level = len(heading.split(" ", 1)[0])
    ends = re.compile(rf"#{{1,{level}}} ")
    fenced, offset = False, start + len(heading)
    for line in text[offset:].splitlines(keepends=True):
        if line.startswith("```"):
            fenced = not fenced  # a reader context's '# facts' lines are not headings
        elif not fenced and ends.match(line):
            return text[start:offset]
        offset += len(line)
    return text[start:]


# -- README: the front page --------------------------------------------------------------

def test_readme_is_a_front_page():
    text = read(README)
    assert len(text) <= 15_000, f"README.md has {len(text)} characters; move reference to docs/"
    intro = text[:text.index("\n## ")]
    assert "LLM context" in intro and "token budget" in intro and "receipt" in intro
    for command in (
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e . && rms-duck demo",
        "python3 -m venv .venv && . .venv/bin/activate && pip install -e '.[test]' "
        "&& python -m pytest -q",
    ):
        assert f"```bash\n{command}\n```" in text
    for kind in ("analytics SQL", "agent store", "auditor"):
        assert f"## Quickstart: {kind}" in text
    assert "Python 3.11 or newer" in text and "MIT" in text and (ROOT / "LICENSE").is_file()
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)", section(text, "## Documentation")))
    assert linked == {f"docs/{page.name}" for page in DOCS}


def test_readme_test_command_is_what_ci_runs():
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert "pip install -e '.[test]' && python -m pytest -q" in read(README)
    assert "python -m pytest -q" in ci and "pip install --quiet -e '.[test]'" in ci


def test_relative_links_point_at_files_and_headings():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+\.md)(?:#[\w-]+)?\)", read(page)):
            assert (page.parent / target).is_file(), f"{page.name} links to missing {target}"
        for target, anchor in re.findall(r"\]\(([^)#\s]*\.md)#([\w-]+)\)", read(page)):
            headings = re.findall(r"^#+ (.+)$", read(page.parent / target), re.M)
            slugs = {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}
            assert anchor in slugs, f"{page.name}: no heading #{anchor} in {target}"


# -- examples with printed output ----------------------------------------------------------

SNIPPET = re.compile(r"```python\n(.*?)```\n\nprints \(real output\):\n\n```\n(.*?)```", re.S)
PAGES_WITH_SNIPPETS = [page for page in PAGES if SNIPPET.search(read(page))]


# Each page's examples start processes and write files: CI's second step runs them all.
@pytest.mark.slow
@pytest.mark.parametrize("page", [pytest.param(page, id=page.name)
                                  for page in PAGES_WITH_SNIPPETS])
def test_printed_outputs_are_real(page, tmp_path, update_golden):
    """Each snippet runs in a fresh process, in order, in one scratch directory per page (the
    auditor example reads the database the agent store example wrote)."""
    text = read(page)
    for code, shown in SNIPPET.findall(text):
        result = run_python(code, cwd=tmp_path)
        if update_golden:
            text = text.replace(f"{code}```\n\nprints (real output):\n\n```\n{shown}```",
                                f"{code}```\n\nprints (real output):\n\n```\n{result.stdout}```")
            continue
        assert result.stdout == shown, f"{page.name}: the output shown after\n{code}\nis stale"
    if update_golden:
        page.write_text(text, encoding="utf-8")


def test_readme_sql_lines_run_on_the_quickstart_data():
    text = read(README)
    quick = section(text, "## Quickstart: analytics SQL")
    code = SNIPPET.search(quick).group(1)
    namespace: dict = {}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(code, "README quickstart", "exec"), namespace)
    con = namespace["con"]
    sql = re.search(r"```sql\n(.*?)```", quick, re.S).group(1)
    statements = [s for s in sql.split(";") if s.strip()]
    assert len(statements) == 3
    for statement in statements:
        assert con.execute(statement).fetchall()


EXAMPLE = re.compile(r"<!-- example: tests/golden/candidates.json ids 1-4, budget 4096, "
                     r"config (\{.*?\}) -->\n```\n(.*?)```", re.S)


def test_format_examples_are_real(update_golden):
    page = ROOT / "docs" / "formats.md"
    text = read(page)
    candidates = json.loads(read(ROOT / "tests" / "golden" / "candidates.json"))[:4]
    examples = EXAMPLE.findall(text)
    assert len(examples) == 3
    for config, shown in examples:
        context = rms_duck.pack_candidates(candidates, budget=4096, config=config).context
        if update_golden:
            text = text.replace(f"{config} -->\n```\n{shown}```",
                                f"{config} -->\n```\n{context}```")
        else:
            assert context == shown, f"docs/formats.md example for {config} is stale"
    if update_golden:
        page.write_text(text, encoding="utf-8")


@pytest.mark.slow
def test_evaluation_table_is_real(update_golden):
    path = ROOT / "docs" / "evaluation.md"
    page = read(path)
    head = "```\n$ rms-duck eval examples/eval_conversations.jsonl\n"
    shown = re.search(re.escape(head) + r"(.*?)```", page, re.S).group(1)
    result = run_cli("eval", "examples/eval_conversations.jsonl", "--quiet", cwd=ROOT)

    def timeless(out: str) -> list[str]:
        return [line for line in out.splitlines() if not line.startswith("time:")]

    if update_golden:
        path.write_text(page.replace(head + shown, head + result.stdout), encoding="utf-8")
        return
    assert timeless(result.stdout) == timeless(shown)


# -- names the pages mention exist ---------------------------------------------------------

def _sql_names(con) -> set[str]:
    return {row[0] for row in con.execute(
        "SELECT function_name FROM duckdb_functions() UNION SELECT table_name FROM "
        "duckdb_tables() UNION SELECT view_name FROM duckdb_views() UNION SELECT type_name "
        "FROM duckdb_types()").fetchall()}


def test_every_sql_name_mentioned_exists(con):
    known = _sql_names(con) | {"rms_duck"}
    for page in PAGES:
        for code in re.findall(r"`[^`\n]+`", read(page)):
            unknown = set(re.findall(r"\brms_[a-z0-9_]+", code)) - known
            assert not unknown, f"{page.name} mentions {sorted(unknown)}, which do not exist"


def _resolve(dotted: str) -> object:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            obj = getattr(obj, name)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_python_name_mentioned_exists():
    for page in PAGES:
        for dotted in set(re.findall(r"\brms_duck(?:\.[A-Za-z_]\w*)+", read(page))):
            try:
                _resolve(dotted)
            except (AttributeError, ModuleNotFoundError):
                pytest.fail(f"{page.name} mentions {dotted}, which does not exist")


def test_every_file_path_mentioned_exists():
    pattern = re.compile(r"`((?:[\w.-]+/)*[\w.-]+\.(?:py|sql|json|jsonl|txt|md))`")
    for page in PAGES:
        for path in set(pattern.findall(read(page))):
            if "/" not in path and not (ROOT / path).exists():
                continue  # a bare file name such as `receipts.py` is checked in architecture
            assert (ROOT / path).exists() or (ROOT / "rms_duck" / path).exists(), (
                f"{page.name} mentions {path}, which does not exist")


# -- SQL reference -------------------------------------------------------------------------

def _macros(con) -> list[tuple[str, str, str | None]]:
    return con.execute(
        "SELECT function_name, any_value(function_type), any_value(comment) "
        "FROM duckdb_functions() "
        "WHERE (function_name LIKE 'rms\\_%' ESCAPE '\\' OR function_name = 'pack_context') "
        "AND function_type IN ('macro', 'table_macro') GROUP BY function_name "
        "ORDER BY function_name").fetchall()


def test_every_macro_has_a_comment(con):
    undocumented = [name for name, _, comment in _macros(con) if not comment]
    assert not undocumented, f"macros without COMMENT: {undocumented}"


def test_sql_reference_table_is_duckdb_functions(con, update_golden):
    page = ROOT / "docs" / "sql-reference.md"
    text = read(page)
    rows = "\n".join(
        f"| `{name}` | {'table macro' if kind == 'table_macro' else 'macro'} | {comment} |"
        for name, kind, comment in _macros(con))
    table = f"| name | kind | signature and purpose |\n| --- | --- | --- |\n{rows}"
    marker = "<!-- generated: macro table -->\n"
    start = text.index(marker) + len(marker)
    end = text.index("\n<!-- end generated -->")
    if update_golden:
        page.write_text(text[:start] + table + text[end:], encoding="utf-8")
        return
    assert "pack_context" in table
    assert text[start:end] == table, "docs/sql-reference.md macro table differs from the macros"


def test_sql_reference_lists_every_table_and_view(con):
    listed = dict(re.findall(r"^\| `(rms_\w+)` \| (table|view) \|", read(
        ROOT / "docs" / "sql-reference.md"), re.M))
    actual = dict(con.execute(
        "SELECT table_name, 'table' FROM duckdb_tables() WHERE table_name LIKE 'rms%' "
        "UNION ALL SELECT view_name, 'view' FROM duckdb_views() WHERE view_name LIKE 'rms%'"
    ).fetchall())
    assert listed == actual


# -- Python API ----------------------------------------------------------------------------

def _documented_signatures() -> list[tuple[str, ast.arguments]]:
    text = read(ROOT / "docs" / "python-api.md")
    out = []
    for block in re.findall(r"```python\n(.*?)```", text, re.S):
        for line in block.splitlines():
            match = re.match(r"^(rms_duck(?:\.\w+)+)\((.*)\)(?: -> .+)?$", line)
            if match:
                stub = ast.parse(f"def f({match.group(2)}): pass").body[0]
                out.append((match.group(1), stub.args))
    return out


def test_python_api_page_covers_the_public_names():
    documented = {name for name, _ in _documented_signatures()}
    public = {f"rms_duck.{name}" for name in rms_duck.__all__
              if name not in ("RmsError", "MemoryBundle", "__version__")}
    assert public <= documented, f"docs/python-api.md lacks {sorted(public - documented)}"
    assert "rms_duck.formats.register_format" in documented
    assert "### MemoryBundle" in read(ROOT / "docs" / "python-api.md")


@pytest.mark.parametrize("name, args", _documented_signatures(),
                         ids=[name for name, _ in _documented_signatures()])
def test_documented_signature_matches_the_code(name, args):
    params = [p for p in inspect.signature(_resolve(name)).parameters.values()
              if not p.name.startswith("_")]
    positional = args.posonlyargs + args.args
    documented = [(a.arg, inspect.Parameter.POSITIONAL_OR_KEYWORD) for a in positional]
    documented += [(a.arg, inspect.Parameter.KEYWORD_ONLY) for a in args.kwonlyargs]
    assert documented == [(p.name, p.kind) for p in params], f"{name}: parameters differ"
    defaults = dict(zip([a.arg for a in positional][len(positional) - len(args.defaults):],
                        args.defaults, strict=True))
    defaults |= {a.arg: d for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                 if d is not None}
    for p in params:
        if p.name in defaults:
            assert ast.literal_eval(defaults[p.name]) == p.default, f"{name}: {p.name} default"
        else:
            assert p.default is inspect.Parameter.empty, f"{name}: {p.name} has a default"


def test_memory_bundle_attributes_are_documented():
    from dataclasses import fields

    from rms_duck.bundle import MemoryBundle
    table = section(read(ROOT / "docs" / "python-api.md"), "### MemoryBundle")
    documented = set(re.findall(r"^\| `(\w+)`(?:, `(\w+)`)?", table, re.M))
    names = {n for pair in documented for n in pair if n}
    missing = [n for n in names if not hasattr(MemoryBundle, n)]
    assert not missing, f"MemoryBundle has no {missing}"
    # `trace` is the frozen per-candidate record behind `decisions` and `receipt`.
    public = {f.name for f in fields(MemoryBundle) if not f.name.startswith("_")} - {"trace"}
    assert public <= names, f"undocumented MemoryBundle fields: {sorted(public - names)}"


def test_every_memory_bundle_member_the_docs_name_exists():
    # python-api.md named MemoryBundle.to_row() for years after the method was removed.
    named = {(page.name, name) for page in PAGES
             for name in re.findall(r"MemoryBundle\.(\w+)", read(page))}
    from rms_duck.bundle import MemoryBundle
    missing = sorted(f"{page}: MemoryBundle.{name}" for page, name in named
                     if not hasattr(MemoryBundle, name))
    assert not missing, missing


def test_to_row_is_the_struct_sql_pack_context_returns():
    con = rms_duck.connect()
    try:
        rows = [{"id": "a", "score": 0.9, "content": "The cut-over is on Friday."},
                {"id": "b", "score": 0.2, "content": "Lunch is at noon. " * 40}]
        bundle = rms_duck.pack(con, "SELECT * FROM (VALUES ('a', 0.9, 'The cut-over is on "
                               "Friday.'), ('b', 0.2, repeat('Lunch is at noon. ', 40))) "
                               "AS t(id, score, content)", budget=160, store=False)
        sql = con.execute("SELECT to_json(pack_context(?, 160))::VARCHAR", [rows]).fetchall()
        assert bundle.excluded_ids == ["b"]
        assert bundle.to_row() == json.loads(sql[0][0])
    finally:
        con.close()


def test_replay_result_attributes_are_documented():
    # tables_read, untracked_tables, tracking and stored_sha256 were left out.
    from dataclasses import fields

    from rms_duck.audit.replay import ReplayResult
    text = read(ROOT / "docs" / "python-api.md")
    start = text.index("A `ReplayResult` has")
    paragraph = text[start:text.index("\n\n", start)]
    public = {f.name for f in fields(ReplayResult)} | {
        name for name, value in vars(ReplayResult).items() if isinstance(value, property)}
    missing = sorted(name for name in public if f"`{name}`" not in paragraph)
    assert not missing, f"python-api.md's ReplayResult paragraph lacks {missing}"


def test_the_config_paragraph_says_when_an_encoding_name_is_checked():
    # "validated on construction": PackingConfig(encoding="o200k") builds, and the pack
    # raises EncodingUnavailableError.
    from rms_duck.errors import EncodingUnavailableError
    text = read(ROOT / "docs" / "python-api.md")
    paragraph = text[text.index("Every setting of a pack"):]
    paragraph = paragraph[:paragraph.index("\n\n")]
    config = rms_duck.PackingConfig(encoding="o200k")
    with pytest.raises(EncodingUnavailableError, match="unknown encoding 'o200k'"):
        rms_duck.pack_candidates([{"id": "a", "score": 0.5, "content": "x"}], budget=300,
                                 config=config)
    assert "`encoding` name is looked up when a pack first counts" in paragraph
    assert "`EncodingUnavailableError`" in paragraph


def test_the_budget_section_says_what_a_budget_of_overhead_tokens_leaves():
    # "A budget at or below overhead_tokens leaves a negative available": at it, 0 is left.
    text = section(read(ROOT / "docs" / "packing.md"), "## Budget")
    bundle = rms_duck.pack_candidates([{"id": "a", "score": 0.5, "content": "x"}], budget=100)
    assert bundle.available == 0 and bundle.config.overhead_tokens == 100
    assert "at or below `overhead_tokens` leaves an `available` of 0\nor less" in text


def test_every_error_class_is_documented_with_its_bases():
    from rms_duck import errors
    table = section(read(ROOT / "docs" / "python-api.md"), "## Errors")
    rows = dict(re.findall(r"^\| `(\w+Error)` \| `?(\w*)`? ?\|", table, re.M))
    classes = {name: cls for name, cls in vars(errors).items()
               if isinstance(cls, type) and issubclass(cls, errors.RmsError)
               and cls is not errors.RmsError}
    assert set(rows) == set(classes)
    for name, cls in classes.items():
        extra = [base.__name__ for base in cls.__bases__ if base is not errors.RmsError]
        assert extra == ([rows[name]] if rows[name] else []), name


# -- packing concepts ----------------------------------------------------------------------

def test_packing_page_names_every_field_reason_flag_and_level():
    from dataclasses import fields

    from rms_duck.config import PackingConfig
    from rms_duck.records import Candidate, Flag, Level, Reason
    text = read(ROOT / "docs" / "packing.md")
    names = [f.name for f in fields(Candidate)] + [f.name for f in fields(PackingConfig)]
    names += [member.value for enum in (Reason, Flag, Level) for member in enum]
    missing = [name for name in names if f"`{name}`" not in text]
    assert not missing, f"docs/packing.md does not name {missing}"


def _shown_default(value: object) -> str:
    """How docs/packing.md spells a default value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return f"`{value}`"
    if isinstance(value, tuple) and not value:
        return "`[]`"
    return str(value)


@pytest.mark.parametrize("heading, cls", [("## Candidates", "Candidate"),
                                          ("## Config", "PackingConfig")])
def test_packing_page_defaults_are_the_code_defaults(heading, cls):
    from dataclasses import MISSING, fields

    from rms_duck import config, records
    target = getattr(records, cls, None) or getattr(config, cls)
    table = section(read(ROOT / "docs" / "packing.md"), heading)
    rows = re.findall(r"^\| (`\w+`(?:, `\w+`)*) \| ([^|]+?) \|", table, re.M)
    shown = {name: default for names, default in rows for name in re.findall(r"`(\w+)`", names)}
    for f in fields(target):
        if f.name not in shown:
            continue  # every field is named somewhere on the page (test above)
        if f.default is MISSING and f.default_factory is MISSING:
            assert shown[f.name] == "required", f.name
        elif f.name == "path_count":
            assert shown[f.name] == "number of distinct `paths`"
        elif f.name == "encoding":  # None resolves to the default (or the model's) on construction
            assert shown[f.name].startswith(_shown_default(target().encoding)), f"{cls}.{f.name}"
        else:
            default = f.default if f.default is not MISSING else f.default_factory()
            assert shown[f.name] == _shown_default(default), f"{cls}.{f.name}"


def test_readme_names_the_default_encoding():
    from rms_duck.config import PackingConfig
    assert f"{PackingConfig().encoding} by default" in read(README)


# -- architecture ------------------------------------------------------------------------

def _modules() -> list[str]:
    base = ROOT / "rms_duck"
    return sorted(p.relative_to(base).as_posix() for p in base.rglob("*.py"))


def test_architecture_names_the_built_in_bases_of_the_errors():
    # It said every error was "also a ValueError or LookupError"; ReceiptError is neither,
    # DatabaseOpenError an OSError, MissingExtraError an ImportError.
    from rms_duck import errors
    line = next(line for line in read(ROOT / "docs" / "architecture.md").splitlines()
                if line.startswith("- `errors.py`"))
    bases = {base.__name__ for cls in vars(errors).values()
             if isinstance(cls, type) and issubclass(cls, errors.RmsError)
             for base in cls.__bases__ if base.__module__ == "builtins" and base is not Exception}
    assert all(f"`{name}`" in line for name in bases), (sorted(bases), line)
    assert "each also" not in line


def test_architecture_lists_every_module_and_only_real_ones():
    text = read(ROOT / "docs" / "architecture.md")
    mentioned = {path for path in re.findall(r"`((?:\w+/)*\w+\.py)`", text)
                 if not path.startswith("tests/")}
    modules = set(_modules())
    assert modules - mentioned == set(), f"not in docs/architecture.md: {modules - mentioned}"
    assert mentioned - modules == set(), f"no such module: {mentioned - modules}"


def test_architecture_layers_are_the_enforced_ones():
    from tests.test_imports import LAYERS
    table = section(read(ROOT / "docs" / "architecture.md"), "## Layers")
    documented = [{unit.removesuffix(".py").removesuffix("/")
                   for unit in re.findall(r"`([\w/.]+)`", cells)}
                  for cells in re.findall(r"^\| \d+ \| (.+?) \|", table, re.M)]
    existing = {p.stem for p in (ROOT / "rms_duck").glob("*.py")} | {
        p.name for p in (ROOT / "rms_duck").iterdir() if (p / "__init__.py").exists()}
    enforced = [layer & existing for layer in LAYERS if layer & existing]
    assert documented == enforced


def test_core_modules_import_no_adapter_library_at_module_level():
    from tests.test_imports import LAYER_OF
    core = {unit for unit, layer in LAYER_OF.items() if layer <= LAYER_OF["packing"]}
    for path in sorted((ROOT / "rms_duck").rglob("*.py")):
        unit = path.relative_to(ROOT / "rms_duck").parts[0].removesuffix(".py")
        if unit not in core:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        names = set()
        for node in tree.body:
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                names.add(node.module.split(".")[0])
        heavy = names & {"duckdb", "sqlglot", "pyarrow"}
        assert not heavy, f"core module {path.name} imports {heavy} at module level"

_AUDIT_SCRIPT = """
import io, json, shutil, sys
import rms_duck
from rms_duck.cli.demo import run_demo
run_demo("rms.duckdb", out=io.StringIO())
run_demo("rms.duckdb", budget=1500, out=io.StringIO())
queries, tamper = json.loads(sys.stdin.read())
con = rms_duck.connect("rms.duckdb")
for query in queries:
    if "rms_verify_receipts()" in query:
        con.close()
        shutil.copy("rms.duckdb", "tampered.duckdb")
        con = rms_duck.connect("tampered.duckdb")
        assert con.execute("SELECT count(*) FROM rms_verify_receipts()").fetchall() == [(0,)]
        con.execute(tamper)
    con.sql(query).show()
    print(SEPARATOR)
"""
SEPARATOR = "-----8<-----"


@pytest.mark.slow
def test_audit_outputs_are_real(tmp_path):
    """The demo database twice, then each query of docs/audits.md and `rms-duck audit`."""
    page = read(ROOT / "docs" / "audits.md")
    pairs = re.findall(r"```sql\n(.*?)```\n```\n(.*?)```", page, re.S)
    assert len(pairs) == 4
    tamper = re.search(r"\(`(UPDATE rms_receipts [^`]+)`\)", page).group(1)
    result = run_python(f"SEPARATOR = {SEPARATOR!r}\n" + _AUDIT_SCRIPT, cwd=tmp_path,
                        stdin=json.dumps([[q for q, _ in pairs], tamper]))

    def masked(text: str) -> str:
        return re.sub(r"[0-9a-f]{12,}", "<hash>", text).strip()

    outputs = result.stdout.split(SEPARATOR)
    for (query, shown), output in zip(pairs, outputs, strict=False):
        assert masked(output) == masked(shown), f"docs/audits.md output of\n{query}\nis stale"
    cli = re.search(r"```\n\$ rms-duck audit --db rms.duckdb --replay\n(.*?)```", page, re.S)
    result = run_cli("audit", "--db", "rms.duckdb", "--replay", cwd=tmp_path)
    assert masked(result.stdout) == masked(cli.group(1))


def test_parallel_packing_thresholds_and_waiting_are_the_code():
    """The pages said 1,024 groups and 8,192 candidates always, and that a call meeting
    workers held by another packed in its own process; once the workers run the thresholds
    are 256 and 2,048, and such a call of the first size waits for them (5de8694), a
    smaller one only behind the call holding them (round 27)."""
    import inspect

    from rms_duck.packing import parallel

    started = f"{parallel.MIN_BUNDLES_STARTED:,} and {parallel.MIN_CANDIDATES_STARTED:,}"
    for page in ("performance.md", "python-api.md", "scale-out.md"):
        text = " ".join((ROOT / "docs" / page).read_text(encoding="utf-8").split())
        assert f"{parallel.MIN_BUNDLES:,} groups and {parallel.MIN_CANDIDATES:,}" in text, page
        assert started in text, page
    performance = " ".join((ROOT / "docs" / "performance.md").read_text().split())
    assert "a call packs in its own process" not in performance
    assert "a call of the first size waits for its turn" in performance
    assert ("a smaller one waits only behind the call holding them and packs here at once "
            "behind a queue") in performance
    assert "behind=None if large else 1" in inspect.getsource(parallel.in_parts)

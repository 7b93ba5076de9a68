"""`dbt run` on examples/dbt packs and stores bundles through the rms_duck.dbt plugin.

Runs the real dbt-duckdb in a subprocess, on a temporary copy of the example project.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

pytest.importorskip("dbt.adapters.duckdb")

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "dbt"


def _dbt_run(project: Path, db: Path) -> subprocess.CompletedProcess:
    """`dbt run` of the project, storing into `db`; it must succeed."""
    dbt = Path(sys.executable).with_name("dbt")
    env = {**os.environ, "RMS_DUCK_DB": str(db), "DBT_SEND_ANONYMOUS_USAGE_STATS": "false"}
    done = subprocess.run([str(dbt), "run", "--profiles-dir", str(project), "--project-dir",
                           str(project)], cwd=project, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done


@pytest.mark.slow
def test_dbt_run_packs_and_stores_bundles_with_receipts(tmp_path):
    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    db = tmp_path / "memory.duckdb"
    done = _dbt_run(project, db)
    assert "PASS=3" in done.stdout
    con = duckdb.connect(str(db), read_only=True)  # plain DuckDB: no rms_duck needed to audit
    try:
        rows = con.execute("SELECT question, tokens_used, included_count, excluded_count "
                           "FROM memory_contexts ORDER BY question").fetchall()
        assert rows == [("Billing export", rows[0][1], 2, 0), ("Heron cut-over", rows[1][1], 3, 1)]
        assert all(0 < tokens <= 200 for _, tokens, _, _ in rows)
        assert con.execute("SELECT * FROM rms_verify_receipts()").fetchall() == []
        assert con.execute("SELECT DISTINCT reason FROM rms_receipt_decisions "
                           "WHERE decision = 'excluded'").fetchall() == [("BELOW_MIN_SCORE",)]
    finally:
        con.close()


@pytest.mark.slow
def test_the_plugin_config_registers_tokenizer_files_for_models(tmp_path):
    """A model's config := {'encoding': NAME} of a Hugging Face tokenizer failed with
    "unknown encoding ... call rms_duck.register_tokenizer_file(...)", which a dbt project
    had no way to call; the plugin's config now lists the files."""
    pytest.importorskip("tokenizers")
    from .hf_tokenizers import save

    project = tmp_path / "project"
    shutil.copytree(EXAMPLE, project, ignore=shutil.ignore_patterns("target", "logs", "*.duckdb*"))
    path, digest = save("additive", tmp_path)
    profile = (project / "profiles.yml").read_text()
    assert profile.endswith("        - module: rms_duck.dbt\n")
    (project / "profiles.yml").write_text(
        profile + "          config:\n            tokenizer_files:\n"
        f"              - {{name: t-dbt, path: '{path}', sha256: '{digest}'}}\n")
    model = project / "models" / "packed_memory.sql"
    text = model.read_text()
    assert "'query': question}" in text
    model.write_text(text.replace("'query': question}", "'query': question, 'encoding': 't-dbt'}"))
    db = tmp_path / "memory.duckdb"
    _dbt_run(project, db)
    con = duckdb.connect(str(db), read_only=True)
    try:
        encodings = con.execute("SELECT DISTINCT json_extract_string(receipt, '$.config.encoding') "
                                "FROM rms_receipts").fetchall()
        assert encodings == [("t-dbt",)]
        assert con.execute("SELECT * FROM rms_verify_receipts()").fetchall() == []
    finally:
        con.close()

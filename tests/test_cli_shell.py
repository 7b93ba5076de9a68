"""The shell: --version, `rms-duck pack` over stdin/stdout, closed pipes, progress bars.

Each command runs as a real subprocess, the way a shell or a non-Python agent calls it.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

import rms_duck
from rms_duck.evaluation.report import ProgressBar

LINES = "\n".join(json.dumps(row) for row in [
    {"id": "n1", "score": 0.9, "content": "The Heron cut-over moved to 2026-12-19."},
    {"id": "n2", "score": 0.4, "content": "Rollback keeps the old cluster read-only.",
     "speaker": "Maya", "event_time": "2026-11-30T09:00:00Z"},
    {"id": "n3", "score": 0.05, "content": "Lunch is at noon."},
]) + "\n"


def rms(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rms_duck", *args], input=stdin,
                          capture_output=True, text=True, timeout=300)


def test_version():
    done = rms("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"rms-duck {rms_duck.__version__}"


@pytest.mark.slow
def test_pack_reads_json_lines_and_prints_one_bundle():
    done = rms("pack", "--budget", "300", "--config", '{"min_score": 0.1}', stdin=LINES)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 1
    bundle = json.loads(lines[0])
    for key in ("context", "tokens_used", "included", "excluded", "flags"):
        assert key in bundle
    expected = rms_duck.pack_candidates([json.loads(x) for x in LINES.splitlines()],
                                        budget=300, config={"min_score": 0.1})
    assert bundle["context"] == expected.context
    assert bundle["excluded"] == [{"id": "n3", "reason": "BELOW_MIN_SCORE", "score": 0.05,
                                   "tier": None}]
    assert bundle["receipt_id"] is None


@pytest.mark.slow
def test_pack_with_db_stores_and_no_store_does_not(tmp_path):
    db = str(tmp_path / "cli.duckdb")
    stored = json.loads(rms("pack", "--budget", "300", "--db", db, "--namespace", "cli",
                            stdin=LINES).stdout)
    skipped = json.loads(rms("pack", "--budget", "300", "--db", db, "--no-store",
                             stdin=LINES).stdout)
    assert stored["receipt_id"] and skipped["receipt_id"] is None
    assert stored["context_sha256"] == skipped["context_sha256"]
    con = duckdb.connect(db, read_only=True)
    try:
        assert con.execute("SELECT chain_namespace, seq FROM rms_receipts").fetchall() == [
            ("cli", 1)]
        assert con.execute("SELECT * FROM rms_verify_receipts()").fetchall() == []
    finally:
        con.close()


@pytest.mark.parametrize("stdin, message", [
    ('{"id": "a", "score": 0.5, "content": "x"}\nnot json\n', "stdin line 2 is not JSON"),
    ('[1, 2]\n', "stdin line 1 must be a JSON object"),
    ('{"id": "a", "score": 5, "content": "x"}\n', "field 'score' must be a number in [0, 1]"),
])
@pytest.mark.slow
def test_pack_bad_input_exits_1_with_the_fix(stdin, message):
    done = rms("pack", "--budget", "300", stdin=stdin)
    assert done.returncode == 1 and done.stdout == ""
    assert message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_bad_line_is_named_by_its_stdin_line_and_creates_no_database(tmp_path):
    db = tmp_path / "fresh.duckdb"
    done = rms("pack", "--budget", "300", "--db", str(db),
               stdin='{"id": "a", "score": 0.5, "content": "x"}\n\n{"id": "b", "content": "y"}\n')
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "stdin line 3: candidate #1 (id 'b'): field 'score' is required" in done.stderr
    assert not db.exists()
    done = rms("pack", "--budget", "300", "--namespace", "x", stdin=LINES)
    assert done.returncode == 1 and "add --db PATH" in done.stderr
    # With --no-store the chain and session were taken and ignored.
    done = rms("pack", "--budget", "300", "--db", str(db), "--no-store", "--session-id", "s",
               stdin=LINES)
    assert done.returncode == 1 and "but --no-store stores nothing" in done.stderr
    assert not db.exists()


def test_stdin_is_read_as_utf8_whatever_the_locale_and_a_bom_is_dropped():
    from rms_duck.cli.pack import read_candidates, utf8_lines
    from rms_duck.errors import CandidateError

    good = b'\xef\xbb\xbf{"id": "a", "score": 0.5, "content": "caf\xc3\xa9 \xe2\x82\xac"}\r\n'
    assert read_candidates(utf8_lines(io.BytesIO(good)))[0]["content"] == "caf\u00e9 \u20ac"
    latin1 = good[3:] + b'{"id": "b", "score": 0.5, "content": "caf\xe9"}\n'
    with pytest.raises(CandidateError, match=r"^stdin line 2 is not UTF-8 text \(byte 0xe9 at "
                                             r"byte 42\); re-encode the input as UTF-8, for "
                                             r"example with iconv -f latin1 -t utf-8$"):
        read_candidates(utf8_lines(io.BytesIO(latin1)))


@pytest.mark.slow
@pytest.mark.parametrize("env", [{"LC_ALL": "C.UTF-8"}, {"PYTHONIOENCODING": "utf-8:strict"}])
def test_a_latin1_line_is_an_error_in_every_locale(env):
    """Under a strict UTF-8 locale `rms-duck pack` died with a UnicodeDecodeError traceback;
    under C.UTF-8 (surrogateescape) it packed the byte as the text "\\udce9" and exited 0."""
    import os

    done = subprocess.run([sys.executable, "-m", "rms_duck", "pack", "--budget", "300"],
                          input=b'{"id": "a", "score": 0.5, "content": "caf\xe9"}\n',
                          capture_output=True, timeout=300, env={**os.environ, **env})
    assert done.returncode == 1 and done.stdout == b"", done.stdout[:200]
    assert b"stdin line 1 is not UTF-8 text (byte 0xe9" in done.stderr
    assert b"Traceback" not in done.stderr


@pytest.mark.slow  # 3-9 s on a 2-core machine: the slow step runs it
def test_a_lone_surrogate_is_named_by_line_and_field_before_a_database_is_made(tmp_path):
    """Input review F8: the store failed after the file was created, naming no line or field
    and advising store=False, a Python argument."""
    db = tmp_path / "fresh.duckdb"
    lines = ('{"id": "ok", "score": 0.9, "content": "fine"}\n'
             '{"id": "n2", "score": 0.5, "content": "bad \\ud800 half"}\n')
    done = rms("pack", "--budget", "300", "--db", str(db), stdin=lines)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert ("stdin line 2: field 'content' holds a lone surrogate ('\\ud800', half of a "
            "UTF-16 pair), which a stored bundle cannot hold; fix the text, or pack with "
            "--no-store") in done.stderr
    assert not db.exists()
    assert rms("pack", "--budget", "300", "--db", str(db), "--no-store",
               stdin=lines).returncode == 0
    db.unlink()
    for nested in ('{"k": "\\ud800"}', '"{\\"k\\": \\"\\\\ud800\\"}"'):
        done = rms("pack", "--budget", "300", "--db", str(db), stdin=(
            '{"id": "a", "score": 0.5, "content": "x", "structured_value": ' + nested + '}\n'))
        assert done.returncode == 1 and not db.exists(), done.stderr
        assert "stdin line 1: field 'structured_value' holds a lone surrogate" in done.stderr
    # A config query is recorded in the receipt: it stored, and verify then read the receipt
    # as malformed JSON. It is refused like a line, before any file is made.
    done = rms("pack", "--budget", "300", "--db", str(db), "--config",
               '{"query": "when did \\ud800 happen first?"}', stdin=LINES)
    assert done.returncode == 1 and not db.exists(), done.stderr
    assert "config field 'query' holds a lone surrogate" in done.stderr
    assert "or pack with --no-store" in done.stderr


@pytest.mark.slow  # 3-9 s on a 2-core machine: the slow step runs it
def test_a_database_that_cannot_be_opened_is_named_without_a_traceback(tmp_path):
    (tmp_path / "text.duckdb").write_text("not a database")
    (tmp_path / "folder").mkdir()
    duckdb.connect(str(tmp_path / "plain.duckdb")).close()
    cases = [(["pack", "--budget", "300", "--db", str(tmp_path / "text.duckdb")], LINES),
             (["pack", "--budget", "300", "--db", str(tmp_path / "folder")], LINES),
             (["pack", "--budget", "300", "--db", str(tmp_path / "no" / "x.duckdb")], LINES),
             (["demo", "--db", str(tmp_path / "text.duckdb")], None)]
    for args, stdin in cases:
        done = rms(*args, stdin=stdin)
        assert done.returncode == 1 and "Traceback" not in done.stderr, args
        assert "Error: cannot open database" in done.stderr and "pass the path of a DuckDB" \
            in done.stderr, args
    with pytest.raises(rms_duck.errors.DatabaseOpenError, match="has no rms_duck schema"):
        rms_duck.connect(str(tmp_path / "plain.duckdb"), read_only=True)


@pytest.mark.slow
def test_empty_stdin_gives_an_empty_bundle_that_says_why():
    bundle = json.loads(rms("pack", "--budget", "300", stdin="").stdout)
    assert bundle["context"] == "" and bundle["flags"] == ["NO_CANDIDATES"]
    assert "no candidates" in bundle["warnings"][0]


@pytest.mark.slow
@pytest.mark.parametrize("records", [1, 400])  # flushed at the end, or while writing
def test_a_closed_pipe_ends_quietly(records):
    big = "\n".join(json.dumps({"id": f"n{i}", "score": 0.5, "content": f"record {i} " * 40})
                    for i in range(records))
    proc = subprocess.Popen([sys.executable, "-m", "rms_duck", "pack", "--budget", "40000"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # `| head -0`: the reader is gone before the bundle is written
    _, err = proc.communicate(big.encode(), timeout=300)
    assert proc.returncode == 141
    assert b"Traceback" not in err and b"BrokenPipe" not in err


def test_progress_bar_draws_only_on_a_terminal():
    piped = io.StringIO()
    ProgressBar("eval", stream=piped)(3, 10)
    assert piped.getvalue() == ""

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty = Terminal()
    ProgressBar("eval", stream=tty)(10, 10)
    assert tty.getvalue().startswith("\reval [") and tty.getvalue().endswith("10/10\n")


@pytest.mark.parametrize("args, message", [
    (["bench", "--smoke", "--repeats", "0"], "argument --repeats: must be 1 or more, got 0"),
    (["bench", "--smoke", "--sizes", "100,0"], "argument --sizes: must be 1 or more, got 0"),
    (["bench", "--smoke", "--budgets=-1"], "argument --budgets: must be 1 or more, got -1"),
    (["bench", "--store-cost=-1"], "argument --store-cost: must be 1 or more, got -1"),
    (["bench", "--rfc", "--smoke", "--json", "/no/such/folder/x.json"],
     "argument --json: folder '/no/such/folder' of '/no/such/folder/x.json' does not exist"),
    (["eval", "examples/eval_conversations.jsonl", "--json", "/no/such/folder/x.json"],
     "argument --json: folder '/no/such/folder'"),
    (["eval", "examples/eval_conversations.jsonl", "--k", "0"], "argument --k: must be 1 or"),
])
def test_bad_counts_and_output_paths_are_usage_errors_before_any_work(args, message, capsys):
    from rms_duck.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(args)
    assert exit_.value.code == 2 and message in capsys.readouterr().err


@pytest.mark.parametrize("option, message", [
    (["--budget", "99999999999"], "budget must be in -2,147,483,648..2,147,483,647 tokens"),
    (["--model", "no-such-model"], "config field 'model' has unknown value 'no-such-model'"),
])
def test_a_bad_demo_option_fails_before_the_file_is_made(tmp_path, capsys, option, message):
    """The demo made the file and loaded its 104 sample nodes before the budget or model
    was checked."""
    from rms_duck.cli import main

    db = tmp_path / "demo.duckdb"
    assert main(["demo", "--db", str(db), *option]) == 1
    assert message in capsys.readouterr().err
    assert not db.exists()


def test_a_negative_eval_budget_says_it_must_be_positive(capsys):
    from rms_duck.cli import main

    assert main(["eval", "examples/eval_conversations.jsonl", "--budgets=-5"]) == 1
    assert "--budgets must be a positive whole number, got -5" in capsys.readouterr().err


@pytest.mark.slow
def test_the_shipped_candidates_file_packs_as_the_docs_show(tmp_path):
    """README and integrations.md pipe examples/candidates.jsonl into `rms-duck pack`; the
    newcomer run found no such file shipped."""
    lines = (Path(__file__).parent.parent / "examples" / "candidates.jsonl").read_text()
    out = json.loads(rms("pack", "--budget", "300", "--no-store", stdin=lines).stdout)
    assert len(out["included"]) == 5 and out["tokens_used"] <= 200
    db = str(tmp_path / "memory.duckdb")
    stored = json.loads(rms("pack", "--budget", "2000", "--db", db, stdin=lines).stdout)
    assert stored["receipt_id"]


def test_json_nested_past_pythons_limit_is_an_error_naming_the_line(tmp_path, capsys):
    """A stdin line, an eval file line or --cues nested 100,000 deep ended in a RecursionError
    traceback from json (config and structured_value already said so clearly)."""
    from rms_duck.cli import main
    from rms_duck.cli.pack import read_candidates
    from rms_duck.errors import CandidateError

    deep = ('{"id": "a", "score": 0.5, "content": "x", "structured_value": '
            + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(CandidateError, match="stdin line 2 is nested too deeply to read"):
        read_candidates(['{"id": "b", "score": 0.5, "content": "y"}', deep])
    path = tmp_path / "deep.jsonl"
    path.write_text(deep + "\n", encoding="utf-8")
    assert main(["eval", str(path), "--quiet"]) == 1
    assert "deep.jsonl line 1: nested too deeply to read" in capsys.readouterr().err
    assert main(["eval", str(path), "--cues", "[" * 100_000 + "]" * 100_000]) == 1
    assert "--cues must be a JSON object" in capsys.readouterr().err


@pytest.mark.parametrize(("argv", "hint"), [
    (["pack", "--budget", "300", "--confg", "{}"], "; --confg: did you mean --config?"),
    (["audit", "--db", "x.duckdb", "--replya"], "; --replya: did you mean --replay?"),
    (["demo", "--fromat=compact"], "; --fromat: did you mean --format?"),
    (["demo", "--foo"], ""),  # nothing close: argparse's own words only
])
def test_a_misspelt_option_is_named_with_the_one_meant(argv, hint, capsys, tmp_path,
                                                      monkeypatch):
    """Python 3.11's argparse said only "unrecognized arguments: --confg {}"."""
    from rms_duck.cli import main

    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    given = " ".join(argv[argv.index(next(a for a in argv if a.startswith("--") and (
        a.split("=")[0] in ("--confg", "--replya", "--fromat", "--foo")))):])
    assert last == f"rms-duck {argv[0]}: error: unrecognized arguments: {given}{hint}"
    assert list(tmp_path.iterdir()) == []  # nothing was created

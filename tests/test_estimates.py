"""Method 2: derived from each encoding's vocabulary, published per script on held-out text."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import pytest

from rms_duck.errors import ConfigError, EncodingUnavailableError
from rms_duck.tokens.derive import derive_chars_per_token, load_ranks
from rms_duck.tokens.estimate import chars_per_token_for, estimate_tokens
from rms_duck.tokens.estimate_tables import CHARS_PER_TOKEN
from rms_duck.tokens.scripts import script_of

DOC = Path(__file__).parent.parent / "docs" / "estimates.md"


def _ranks(name: str):
    try:
        return load_ranks(name)
    except (EncodingUnavailableError, ImportError):
        pytest.skip(f"{name} ranks are not available offline here")


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CHARS_PER_TOKEN))
def test_shipped_tables_are_the_vocabulary_derivation(name):
    assert derive_chars_per_token(_ranks(name)) == CHARS_PER_TOKEN[name]


def test_every_script_has_a_ratio_for_every_encoding():
    for name, table in CHARS_PER_TOKEN.items():
        for script in ("latin", "cyrillic", "bengali", "tamil", "georgian", "armenian", "han",
                       "hangul", "ethiopic", "myanmar", "tifinagh", "digit", "symbol"):
            assert table[script] > 0, (name, script)


def test_scripts_come_from_unicode_names():
    assert [script_of(c) for c in "aé Я ক 中 한 5 ,"] == [
        "latin", "latin_ext", "space", "cyrillic", "space", "bengali", "space", "han",
        "space", "hangul", "space", "digit", "space", "symbol"]


def test_estimate_overrides_and_errors():
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcdefgh", 4.0) == 2
    assert estimate_tokens("hello world") == 2
    text = "নমস্কার বন্ধু"
    assert estimate_tokens(text, {"bengali": 100.0}, encoding="cl100k_base") < estimate_tokens(
        text, encoding="cl100k_base")
    assert estimate_tokens(text, encoding="o200k_base") < estimate_tokens(
        text, encoding="cl100k_base")  # o200k_base's vocabulary covers Bengali, cl100k's not
    assert chars_per_token_for("some_future_encoding") == CHARS_PER_TOKEN["o200k_base"]
    with pytest.raises(ConfigError, match="unknown character class 'klingon'"):
        estimate_tokens("x", {"klingon": 2.0})
    with pytest.raises(ConfigError, match=r"chars_per_token\['latin'\] must be a number of "
                       r"characters per token of at least 0.25"):
        estimate_tokens("x", {"latin": 0})


@pytest.mark.parametrize("spec, expected", [
    ("1e-300", "must be a number of characters per token of at least 0.25"),
    ("0.1", "must be a number of characters per token of at least 0.25"),
    ("'-4'", "must be a number of characters per token of at least 0.25"),
    ("'4_0'", "second argument must be characters per token (a number) or an encoding name, "
              "got '4_0'"),
    ("' 4 '", "got ' 4 '"),
    ("'nan'", "got 'nan'"),
])
def test_sql_estimate_refuses_ratios_no_text_can_have(spec, expected):
    """SQL-surface review: 1e-300 gave Python's OverflowError, and '4_0' read as 40."""
    import duckdb

    import rms_duck

    con = rms_duck.connect()
    with pytest.raises(duckdb.Error) as info:
        con.execute(f"SELECT rms_token_estimate('hello world', {spec})").fetchall()
    assert expected in str(info.value)
    assert con.execute("SELECT rms_token_estimate('hello world', 0.25), "
                       "rms_token_estimate('hello world', '4.5')").fetchall() == [(44, 3)]


@pytest.mark.slow
def test_docs_table_is_the_held_out_measurement():
    pytest.importorskip("babel")
    pytest.importorskip("faker")
    from rms_duck.bench import estimates

    for name in CHARS_PER_TOKEN:
        _ranks(name)
    report = estimates.error_table(estimates.held_out_texts())
    assert estimates.format_markdown(report) in DOC.read_text(encoding="utf-8")


def test_docs_headline_matches_its_table():
    """The headline sentence quotes the table's first row (the slow test recomputes it)."""
    doc = DOC.read_text(encoding="utf-8")
    row = next(line for line in doc.splitlines() if line.startswith("| **all held-out"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    cl_median, cl_p95, o2_median, o2_p95 = cells[2], cells[3], cells[5], cells[6]
    headline = re.search(r"Headline: (.*?)\n\n", doc, re.S).group(1)
    assert f"o200k_base median {o2_median}, p95 {o2_p95}" in headline
    assert f"cl100k_base median {cl_median}, p95 {cl_p95}" in " ".join(headline.split())


def test_an_unknown_encoding_is_refused_as_in_sql(con):
    # estimate_tokens(text, encoding="o200k") estimated with o200k_base's ratios, silently,
    # while rms_token_estimate(text, 'o200k') in SQL refused the name.
    from rms_duck.tokens.estimate import set_chars_per_token

    with pytest.raises(ConfigError, match=r"^estimate_tokens encoding must name an encoding, "
                                          r"got 'o200k'\. Did you mean 'o200k_base'\? Known "
                                          r"encodings: cl100k_base, .*o200k_base"):
        estimate_tokens("Hello world", encoding="o200k")
    with pytest.raises(duckdb.Error, match="got 'o200k'. Did you mean 'o200k_base'"):
        con.execute("SELECT rms_token_estimate('Hello world', 'o200k')").fetchall()
    for name in ("o200k_base", "cl100k_base", "o200k_harmony", "p50k_base"):
        assert estimate_tokens("Hello world", encoding=name) >= 1
    set_chars_per_token("my-tokenizer-est-test", {"latin": 3.0})  # a name given ratios
    assert estimate_tokens("Hello world", encoding="my-tokenizer-est-test") >= 1


@pytest.mark.parametrize("name", [["o200k_base"], {"o200k_base": 1}, 5])
def test_an_encoding_that_is_no_name_is_refused_by_field(name):
    # The name check that refuses 5 ran after a membership test of the ratio tables, where
    # a list or dict raised a bare "TypeError: unhashable type".
    with pytest.raises(ConfigError, match=r"^estimate_tokens encoding must name an encoding, "
                                          rf"got {re.escape(repr(name))}\. Known encodings: "):
        estimate_tokens("Hello world", encoding=name)


def test_a_model_name_given_as_the_encoding_is_named_as_in_sql(con):
    # The new name check copied SQL's rms_token_estimate check without its model-name hint:
    # 'gpt-4o' was told "Did you mean 'gpt2'?", another encoding, where SQL names o200k_base.
    with pytest.raises(ConfigError, match=r"^estimate_tokens: 'gpt-4o' is a model name, not an "
                                          r"encoding: its encoding is 'o200k_base'; pass "
                                          r"'o200k_base'"):
        estimate_tokens("Hello world", encoding="gpt-4o")
    with pytest.raises(duckdb.Error, match="'gpt-4o' is a model name, not an encoding"):
        con.execute("SELECT rms_token_estimate('Hello world', 'gpt-4o')").fetchall()

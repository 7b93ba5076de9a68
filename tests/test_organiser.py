"""Method 3: the organiser pass fills and refreshes rms_nodes.token_cost_estimate."""

from __future__ import annotations

import pytest

import rms_duck
from rms_duck.bench.simulate import independent_encoding
from rms_duck.errors import ConfigError
from rms_duck.tokens.estimate import estimate_tokens


def test_refresh_fills_then_refreshes_only_stale_rows_of_a_legacy_plain_column(con):
    # Databases made before the generated column hold a plain one the organiser maintains.
    con.execute("ALTER TABLE rms_nodes DROP COLUMN token_cost_estimate")
    con.execute("ALTER TABLE rms_nodes ADD COLUMN token_cost_estimate INTEGER")
    con.execute("INSERT INTO rms_nodes (id, content) VALUES "
                "('00000000-0000-4000-8000-000000000001', 'hello world'), "
                "('00000000-0000-4000-8000-000000000002', '你好，世界')")
    assert rms_duck.refresh_token_estimates(con) == 2
    rows = con.execute("SELECT content, token_cost_estimate FROM rms_nodes ORDER BY id").fetchall()
    assert rows == [(text, estimate_tokens(text)) for text, _ in rows]
    assert rms_duck.refresh_token_estimates(con) == 0
    con.execute("UPDATE rms_nodes SET content = 'a much longer text than before, with more words' "
                "WHERE id = '00000000-0000-4000-8000-000000000001'")
    assert rms_duck.refresh_token_estimates(con) == 1


def test_sql_token_functions(con, enc):
    text = "Special <|endoftext|> spelled as text"
    assert con.execute("SELECT rms_token_count(?)", [text]).fetchall() == [
        (len(enc.encode_ordinary(text)),)]
    for name in ("o200k_base", "cl100k_base"):
        assert con.execute("SELECT rms_token_count(?, ?)", [text, name]).fetchall() == [
            (len(independent_encoding(name).encode_ordinary(text)),)]
    assert con.execute("SELECT rms_token_estimate('abcdefgh', 4.0)").fetchall() == [(2,)]
    assert con.execute("SELECT rms_token_count(NULL), rms_token_estimate(NULL)").fetchall() == [
        (None, None)]


def test_sql_estimate_takes_an_encoding_for_its_ratios(con):
    text = "Привет, мир: a mixed line 12345"
    for name in ("o200k_base", "cl100k_base", "o200k_harmony"):
        assert con.execute("SELECT rms_token_estimate(?, ?)", [text, name]).fetchall() == [
            (estimate_tokens(text, encoding=name),)]
    assert estimate_tokens(text, encoding="cl100k_base") != estimate_tokens(text)
    assert con.execute("SELECT rms_token_estimate(?)", [text]).fetchall() == [
        (estimate_tokens(text, encoding="o200k_base"),)]


def test_sql_estimate_rejects_an_unknown_encoding(con):
    with pytest.raises(Exception) as info:
        con.execute("SELECT rms_token_estimate('x', 'o200k')").fetchall()
    assert "o200k" in str(info.value) and "Did you mean 'o200k_base'?" in str(info.value)
    with pytest.raises(ConfigError, match="characters per token"):
        from rms_duck.duck.udfs import _estimate_spec
        _estimate_spec("o200k")

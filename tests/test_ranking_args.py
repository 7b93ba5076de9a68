"""rms_candidates() arguments: each bad one is an error that names it, and an embedding with
no direction never ranks (review of the SQL surface, each case from its reproduction)."""

from __future__ import annotations

import re

import duckdb
import pytest

import rms_duck
from rms_duck.duck.ranking import RankingWeights, parse_cues, parse_weights, refresh_index
from rms_duck.errors import ConfigError

NODES = [("00000000-0000-0000-0000-000000000001", "The budget review is on Friday.", [1, 0, 0]),
         ("00000000-0000-0000-0000-000000000003", "Gardening: the tomatoes need water.",
          [0, 0, 0]),
         ("00000000-0000-0000-0000-000000000004", "Budget numbers are final.", [0.9, 0.1, 0])]


@pytest.fixture(scope="module")
def ranked():
    con = rms_duck.connect()
    con.executemany("INSERT INTO rms_nodes (id, namespace_id, content, embedding) "
                    "VALUES (?, 'ns', ?, ?)", [list(n) for n in NODES])
    refresh_index(con)
    yield con
    con.close()


def _error(con, args: str) -> str:
    with pytest.raises(duckdb.Error) as info:
        con.execute(f"SELECT * FROM rms_candidates('budget', {args})").fetchall()
    return str(info.value)


def test_a_node_whose_embedding_is_all_zeros_does_not_top_the_ranking(ranked):
    """Its cosine is NaN, which compared greater than every score: the gardening node came
    first with 0.61 and a VECTOR path."""
    rows = ranked.execute("SELECT id, paths FROM rms_candidates('budget', "
                          "query_embedding := [1, 0, 0])").fetchall()
    assert [r[0] for r in rows] == [NODES[0][0], NODES[2][0]]
    assert all("VECTOR" in paths for _, paths in rows)


@pytest.mark.parametrize("embedding", ["[0, 0, 0]", "['nan'::FLOAT, 0, 0]", "[]::FLOAT[]",
                                       "[1, NULL, 0]", "['inf'::DOUBLE, 0, 0]"])
def test_a_query_embedding_with_no_direction_is_an_error_naming_it(ranked, embedding):
    message = _error(ranked, f"query_embedding := {embedding}")
    assert "query_embedding must be a non-empty list of finite numbers, not all 0" in message
    assert "or NULL to rank without the VECTOR path" in message


def test_a_query_embedding_of_the_wrong_size_names_both_sizes(ranked):
    message = _error(ranked, "query_embedding := [1, 0]")
    assert "query_embedding has 2 dimensions but the embedding of node" in message
    assert "has 3" in message


@pytest.mark.parametrize("args, expected", [
    ("k := NULL", "k must be a whole number >= 0, got NULL"),
    ("k := 2.5", "k must be a whole number >= 0, got 2.5"),
    ("k := -1", "k must be a whole number >= 0, got -1"),
    ("ngram_min := 2", "ngram_min must be a number in [0, 1], got 2"),
    ("ngram_min := -1", "ngram_min must be a number in [0, 1], got -1"),
    ("ngram_min := 'nan'::DOUBLE", "ngram_min must be a number in [0, 1], got nan"),
    ("ngram_min := NULL", "ngram_min must be a number in [0, 1], got NULL"),
    ("weights := {'lexcial': 1}", "ranking weights: unknown field(s) lexcial"),
    ("weights := {'lexical': 0.5, 'bogus': 0.5}", "ranking weights: unknown field(s) bogus"),
    ("cues := {'speakr': 0}", "ranking cues: unknown field(s) speakr"),
    ("cues := {'speakr': 0, 'time': 0.5}", "ranking cues: unknown field(s) speakr"),
    ("cues := {'neighbours': 1.5}", "ranking cues out of range"),
    ("cues := {'feedback_docs': 100000000000}", "ranking cues out of range"),
])
def test_a_bad_ranking_argument_is_an_error_naming_it(ranked, args, expected):
    assert expected in _error(ranked, args)


@pytest.mark.parametrize("args, expected", [
    ("k := 9223372036854775807", "k must be a whole number >= 0, got 9223372036854775807"),
    ("k := 'abc'", "k must be a whole number >= 0, got abc"),
    ("k := true", "k must be a whole number >= 0, got true"),  # was taken as k := 1
    ("weights := {'lexical': true}", "ranking weights: field lexical must be a number, got true"),
    ("weights := [1, 2]", "ranking weights must be a STRUCT or JSON object"),
    ("cues := 5", "ranking cues must be a STRUCT or JSON object such as {'speaker': 0}, got 5"),
    ("cues := {'time': 'late'}", "ranking cues: field time must be a number, got \"late\""),
    # malformed JSON text: DuckDB's cast failed with "Malformed JSON", naming no argument
    ("weights := '{\"lexical\": 1'", "ranking weights must be a STRUCT, MAP or JSON object "
                                      "such as {'lexical': 0.6, 'ngram': 0.4}, got "
                                      "{\"lexical\": 1 (not valid JSON)"),
    ("weights := ''", "ranking weights must be a STRUCT, MAP or JSON object"),
    ("cues := 'speaker=0'", "ranking cues must be a STRUCT, MAP or JSON object such as "
                            "{'speaker': 0}, got speaker=0 (not valid JSON)"),
])
def test_arguments_of_the_wrong_kind_are_named_too(ranked, args, expected):
    """Review of this change: these gave a binder or conversion error naming no argument,
    or (cues := 5) were accepted as the defaults."""
    assert expected in _error(ranked, args)


@pytest.mark.slow
def test_weights_and_cues_may_be_json_text_or_a_map(ranked):
    """Review of this change: JSON text was read as a JSON string, so weights summed to 0
    and a cue given as text was silently the default."""
    def ids(args: str) -> list:
        return [r[0] for r in ranked.execute(
            f"SELECT id FROM rms_candidates('budget', {args})").fetchall()]

    assert ids("weights := '{\"lexical\": 1}'") == ids("weights := {'lexical': 1.0}")
    assert ids("weights := MAP {'lexical': 1.0}") == ids("weights := {'lexical': 1.0}")
    with pytest.raises(duckdb.Error, match="ranking cues out of range"):
        ranked.execute("SELECT * FROM rms_candidates('budget', cues := '{\"time\": 7}')")


@pytest.mark.parametrize("args", ["k := -1", "k := NULL", "k := 2.5", "ngram_min := 3",
                                  "query_embedding := [0, 0, 0]"])
def test_rms_candidate_scores_checks_its_arguments_as_well(ranked, args):
    """Review of this change: rms_candidate_scores (public too) returned no rows for them."""
    for query in ("budget", "zzzz"):
        with pytest.raises(duckdb.Error, match="rms_candidates: "):
            ranked.execute(f"SELECT * FROM rms_candidate_scores('{query}', {args})").fetchall()
    assert ranked.execute("SELECT count(*) FROM rms_candidate_scores('budget', k := 0)"
                          ).fetchall() == [(0,)]


@pytest.mark.slow
def test_the_argument_checks_run_when_nothing_matches():
    con = rms_duck.connect()
    assert con.execute("SELECT * FROM rms_candidates('budget')").fetchall() == []
    for args in ("k := NULL", "ngram_min := 3", "query_embedding := [0, 0]"):
        with pytest.raises(duckdb.Error, match="rms_candidates: "):
            con.execute(f"SELECT * FROM rms_candidates('budget', {args})").fetchall()


def test_good_arguments_still_rank(ranked):
    rows = ranked.execute(
        "SELECT id FROM rms_candidates('budget', k := 1, ngram_min := 0, "
        "weights := {'lexical': 0.6, 'ngram': 0.2, 'vector': 0.1, 'salience': 0.1}, "
        "cues := {'speaker': 0, 'neighbours': 0})").fetchall()
    assert rows == [(NODES[0][0],)]


@pytest.mark.parametrize("call", [
    "rms_bm25('budget', k1 := -1.2)", "rms_bm25('budget', b := 2)",
    "rms_bm25('budget', k1 := NULL)", "rms_bm25('budget', k1 := 'nan'::DOUBLE)",
    "rms_bm25('zzzz', b := -1)",  # checked when nothing matches too
    "rms_bm25_terms([{'term': 'budget', 'weight': 1.0}], b := 3)",
])
def test_bm25_parameters_out_of_range_are_an_error_naming_them(ranked, call):
    """k1 := -1.2 gave negative scores, k1 := 'nan' NaN and k1 := NULL NULL, all without a
    word; b outside [0, 1] too. The analyst's own BM25 ranking read them as scores."""
    function = call.split("(")[0]
    with pytest.raises(duckdb.Error, match=rf"{function}: k1 must be a finite number >= 0 and "
                                           r"b a number in \[0, 1\], got k1 .*; pass for "
                                           r"example k1 := 1.2, b := 0.75"):
        ranked.execute(f"SELECT * FROM {call}").fetchall()
    assert ranked.execute("SELECT count(*) FROM rms_bm25('budget', k1 := 0, b := 1)"
                          ).fetchall() == [(2,)]


@pytest.mark.parametrize(("call", "name", "value"), [
    ("rms_feedback_terms('budget', docs := -1)", "docs", "-1"),
    ("rms_feedback_terms('budget', docs := NULL)", "docs", "NULL"),
    ("rms_feedback_terms('budget', docs := true)", "docs", "true"),
    ("rms_feedback_terms('budget', terms := 2.5)", "terms", "2.5"),
    ("rms_feedback_terms('budget', terms := 'a')", "terms", "a"),
    ("rms_specificity(rare_df := -3)", "rare_df", "-3"),
    ("rms_specificity(rare_df := NULL)", "rare_df", "NULL"),
])
def test_count_arguments_that_are_not_whole_numbers_are_an_error_naming_them(
        ranked, call, name, value):
    """docs := -1 failed as "LIMIT/OFFSET cannot be negative", terms := 'a' as a failed cast
    to INT64; terms := 2.5 was rounded, docs := NULL meant no limit and rare_df := -3 made
    every node 0, all without a word."""
    function = call.split("(")[0]
    with pytest.raises(duckdb.Error, match=rf"{function}: {name} must be a whole number >= 0, "
                                           rf"got {re.escape(value)}; pass for example {name} := "):
        ranked.execute(f"SELECT * FROM {call}").fetchall()


def test_count_arguments_given_as_whole_numbers_still_rank(ranked):
    assert len(ranked.execute("SELECT * FROM rms_feedback_terms('budget', docs := 2, "
                              "terms := '3')").fetchall()) == 3
    assert ranked.execute("SELECT count(*) FROM rms_specificity(rare_df := 0.0)"
                          ).fetchall() == [(3,)]


@pytest.mark.parametrize(("build", "message"), [
    # Each named the value but not what to pass, and the cue's hint trailed its list
    # ("known: ..., feedback_terms Did you mean 'speaker'?").
    (lambda: RankingWeights(lexical=-0.1, ngram=0.65),
     "ranking weight 'lexical' must be a number in [0, 1], got -0.1; the defaults are "
     "lexical=0.45, ngram=0.25, vector=0.2, salience=0.1 (0 leaves a signal out)"),
    (lambda: parse_weights(["lexical"]),
     "ranking weights must be a mapping of lexical, ngram, vector, salience, got ['lexical']; "
     "pass for example {'lexical': 0.6, 'ngram': 0.4}"),
    (lambda: parse_weights({"lexcial": 1.0}),
     "unknown ranking weight 'lexcial'. Did you mean 'lexical'? Known: lexical, ngram, vector, "
     "salience"),
    (lambda: parse_cues({"speakr": 0}), "unknown ranking cue 'speakr'. Did you mean 'speaker'? "
                                        "Known: "),
    (lambda: parse_cues(3), "ranking cues must be a mapping of "),
])
def test_ranking_weight_and_cue_errors_name_the_fix(build, message):
    with pytest.raises(ConfigError) as raised:
        build()
    assert str(raised.value).startswith(message)
    if "mapping of speaker" in str(raised.value):
        assert str(raised.value).endswith("pass for example {'speaker': 0} to turn one off")

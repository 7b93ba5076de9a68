"""The stronger lexical path (Snowball stems, stop words per language, incremental index) and
the ranking cues (speaker, month window, specificity, session neighbours, feedback)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime

import pytest

import rms_duck
from rms_duck.cli import main
from rms_duck.duck.ranking import (
    RankingCues,
    parse_cues,
    refresh_index,
    set_index_language,
)
from rms_duck.duck.sqlfiles import read_sql
from rms_duck.duck.stemming import ENGLISH_STOPWORDS, check_language, stem_words
from rms_duck.duck.udfs import UDFS
from rms_duck.errors import ConfigError
from tests.test_ranking import add, nid

OFF = RankingCues.off().as_struct()


def ids(con, query: str, cues=None, k: int = 50, column: str = "CAST(node_id AS VARCHAR)"):
    return con.sql(f"SELECT {column} FROM rms_candidate_scores(?, 'ns', ?, cues := ?)",
                   params=[query, k, cues]).fetchall()


# -- stems and stop words -------------------------------------------------------------------

def test_stems_meet_across_word_forms(con):
    add(con, 1, "I adopted two greyhounds last weekend")
    add(con, 2, "The weather was grey")
    refresh_index(con)
    assert con.sql("SELECT rms_stem('adopted'), rms_stem('greyhounds')").fetchall() == [
        ("adopt", "greyhound")]
    [(node,)] = con.sql("SELECT CAST(node_id AS VARCHAR) FROM rms_bm25('adopting a greyhound',"
                        " 'ns')").fetchall()
    assert node == nid(1)
    assert "rms_stem_udf" in {udf.name for udf in UDFS}


def test_english_stop_words_are_the_schema_seed():
    seed = re.search(r"INSERT INTO rms_stopwords\s+SELECT unnest\(string_split\((.*?), ','\)\)",
                     read_sql("schema.sql"), re.S).group(1)
    words = set("".join(re.findall(r"'([^']*)'", seed)).split(","))
    assert words == ENGLISH_STOPWORDS


def test_language_change_rebuilds_with_its_stems_and_stop_words(con):
    add(con, 1, "Die Kinder spielten im Garten")
    refresh_index(con)
    assert set_index_language(con, "german", stopwords=["die", "im"]).indexed == 1
    terms = {t for (t,) in con.sql("SELECT term FROM rms_lexical_terms").fetchall()}
    assert terms == {"kind", "spielt", "gart"}
    assert con.sql("SELECT * FROM rms_lexical_config").fetchall() == [("german", "german")]
    [(node,)] = con.sql("SELECT CAST(node_id AS VARCHAR) FROM rms_bm25('Kind', 'ns')").fetchall()
    assert node == nid(1)
    set_index_language(con, "none", stopwords=[])
    terms = {t for (t,) in con.sql("SELECT term FROM rms_lexical_terms").fetchall()}
    assert terms == {"die", "kinder", "spielten", "im", "garten"}


def test_an_index_built_before_stemming_is_rebuilt_once(con):
    add(con, 1, "running dogs")
    refresh_index(con)
    con.execute("UPDATE rms_lexical_config SET indexed_language = NULL")
    con.execute("UPDATE rms_lexical_terms SET term = 'running' WHERE term = 'run'")
    assert con.sql("SELECT rms_index_language()").fetchall() == [("none",)]
    assert refresh_index(con).indexed == 1
    assert refresh_index(con).indexed == 0  # incremental again
    assert {t for (t,) in con.sql("SELECT term FROM rms_lexical_terms").fetchall()} == {
        "run", "dog"}


@pytest.mark.parametrize("language, message", [
    ("englsh", "Did you mean 'english'?"),
    (3, "got 3"),
])
def test_unknown_language_names_the_value_and_the_fix(con, language, message):
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        set_index_language(con, language)
    assert "Snowball stemmer name" in str(err.value)


@pytest.mark.parametrize("stopwords", ["der die das", ["der", None], ["der", 3], 3])
def test_stop_words_that_are_not_a_list_of_words_are_refused_and_change_nothing(con,
                                                                                  stopwords):
    """A string was iterated letter by letter ("der die das" made d, e, r, i, a and s the
    stop words) and None became the stop word 'none', both without a word; a value that is
    not a list at all (3) raised a bare TypeError."""
    add(con, 1, "Die Kinder spielten im Garten")
    refresh_index(con)
    before = con.sql("SELECT * FROM rms_stopwords ORDER BY ALL").fetchall()
    with pytest.raises(ConfigError, match=r"stopwords must be a list of words, got .*; pass "
                                          r"for example stopwords=\['der', 'die', 'das'\]"):
        set_index_language(con, "german", stopwords=stopwords)
    assert con.sql("SELECT * FROM rms_stopwords ORDER BY ALL").fetchall() == before
    assert con.sql("SELECT language FROM rms_lexical_config").fetchall() == [("english",)]
    assert set_index_language(con, "german", stopwords=iter(["die", "im"])).indexed == 1
    assert con.sql("SELECT * FROM rms_stopwords ORDER BY ALL").fetchall() == [("die",), ("im",)]


def test_stem_words_keeps_nulls_and_none_is_identity():
    assert stem_words(["cats", None], "english") == ["cat", None]
    assert stem_words(["cats"], "none") == ["cats"]
    assert check_language(" English ") == "english"


# -- cues -------------------------------------------------------------------------------------

@pytest.fixture
def chat(con):
    """Two speakers, one session of five turns in March 2024, one in May 2024."""
    turns = [
        (1, "Ana", "I adopted a greyhound from the shelter", 1, "s1", "2024-03-02"),
        (2, "Ben", "What did you call her?", 2, "s1", "2024-03-02"),
        (3, "Ana", "Pepper, after the spice", 3, "s1", "2024-03-02"),
        (4, "Ben", "The weather was awful all week", 4, "s1", "2024-03-02"),
        (5, "Ben", "Rain again, typical for the season", 5, "s1", "2024-03-02"),
        (6, "Ana", "Pepper hurt a paw chasing a squirrel", 1, "s2", "2024-05-20"),
        (7, "Ben", "I bought a red bicycle", 2, "s2", "2024-05-20"),
    ]
    for i, speaker, text, position, session, day in turns:
        add(con, i, text, speaker=speaker, session_id=session, session_position=position,
            event_time=datetime.fromisoformat(day).replace(tzinfo=UTC))
    refresh_index(con)
    return con


def test_cues_off_is_the_composite_alone(chat):
    rows = ids(chat, "greyhound", OFF, column="paths")
    assert rows == [(["LEXICAL", "NGRAM"],)] or all("SPEAKER" not in r[0] for r in rows)


def test_named_speaker_is_a_path_and_a_boost(chat):
    cues = {**OFF, "speaker": 0.3}
    rows = dict(chat.sql("SELECT CAST(node_id AS VARCHAR), paths FROM rms_candidate_scores("
                         "'What did Ana say?', 'ns', 50, ngram_min := 1.0, cues := ?)",
                         params=[cues]).fetchall())
    assert {k for k, paths in rows.items() if "SPEAKER" in paths} == {nid(1), nid(3), nid(6)}
    assert chat.sql("SELECT speaker FROM rms_named_speakers('did ana or bo call?', 'ns')"
                    ).fetchall() == [("Ana",)]


def test_month_window_is_a_path(chat):
    assert chat.sql("SELECT rms_month_window('What happened in May 2024?'), "
                    "rms_month_window('in march'), rms_month_window('no month')").fetchall() == [
        ({"month": 5, "year": 2024}, {"month": 3, "year": None}, None)]
    cues = {**OFF, "time": 0.5}
    rows = dict(chat.sql("SELECT CAST(node_id AS VARCHAR), paths FROM rms_candidate_scores("
                         "'What happened in May 2024?', 'ns', 50, ngram_min := 1.0, cues := ?)",
                         params=[cues]).fetchall())
    assert {k for k, paths in rows.items() if "TIME" in paths} == {nid(6), nid(7)}


@pytest.mark.parametrize("question, month", [
    ("May I ask what Ben bought?", None), ("It may rain in may", 5), ("May 2024 plans?", 5),
    ("What did Ana do on May 20?", 5), ("May 20, 2024", 5), ("last may", 5),
])
def test_the_word_may_is_a_month_only_beside_a_preposition_a_year_or_a_day(chat, question,
                                                                         month):
    """"May I ask what Ben bought?" named May: the TIME cue then lifted every node dated in
    May (here the bicycle and the paw) for a question about no time."""
    [(window,)] = chat.sql("SELECT rms_month_window(?)", params=[question]).fetchall()
    assert (window and window["month"]) == month
    rows = chat.sql("SELECT paths FROM rms_candidate_scores(?, 'ns', 50, ngram_min := 1.0, "
                    "cues := ?)", params=[question, {**OFF, "time": 0.5}]).fetchall()
    assert any("TIME" in paths for (paths,) in rows) == (month is not None)


@pytest.mark.slow
def test_path_count_counts_independent_retrievers_only(chat):
    # The packer takes path_count >= 2 first, and the score already fuses every signal. So
    # only independent retrievers count: the words (LEXICAL, FEEDBACK and NGRAM are one) and
    # the user's VECTOR. SPEAKER and TIME mark every turn of a named speaker or month, and
    # SESSION_CONTEXT passes on a share of a hit's score; they stay in `paths`.
    cues = {**OFF, "speaker": 0.3, "time": 0.5, "neighbours": 2, "neighbour_seeds": 3}
    rows = {r[0]: (r[1], r[2]) for r in chat.sql(
        "SELECT CAST(node_id AS VARCHAR), paths, path_count FROM rms_candidate_scores("
        "'What did Ana say about the greyhound in March?', 'ns', 50, cues := ?)",
        params=[cues]).fetchall()}
    assert rows[nid(1)] == (["LEXICAL", "NGRAM", "SPEAKER", "TIME"], 1)
    assert rows[nid(3)] == (["SESSION_CONTEXT", "SPEAKER", "TIME"], 1)
    # Found by the words and by the user's own vector: two retrievers.
    chat.execute("UPDATE rms_nodes SET embedding = [1.0, 0.0, 0.0] WHERE id = ?", [nid(1)])
    row = chat.sql("SELECT paths, path_count FROM rms_candidate_scores('greyhound', 'ns', 50, "
                   "query_embedding := [1.0, 0.0, 0.0], cues := ?) WHERE node_id = ?",
                   params=[OFF, nid(1)]).fetchall()
    assert row == [(["LEXICAL", "NGRAM", "VECTOR"], 2)]


def test_session_neighbours_inherit_a_share_of_the_score(chat):
    cues = {**OFF, "neighbours": 2, "neighbour_seeds": 1, "neighbour_decay": 0.5}
    rows = chat.sql("SELECT CAST(node_id AS VARCHAR), score, paths FROM rms_candidate_scores("
                    "'adopted greyhound', 'ns', 50, ngram_min := 1.0, cues := ?)",
                    params=[cues]).fetchall()
    by_id = {r[0]: r for r in rows}
    assert set(by_id) == {nid(1), nid(2), nid(3)}  # the hit and the two turns after it
    assert by_id[nid(3)][2] == ["SESSION_CONTEXT"]
    assert by_id[nid(3)][1] == pytest.approx(0.5 * by_id[nid(1)][1])


def test_feedback_reaches_a_turn_through_the_top_hits_words(chat):
    # "pepper" is in the turn that answers the question, so the expanded query finds
    # the later turn about Pepper's paw.
    assert "pepper" in {t for (t, _) in chat.sql(
        "SELECT * FROM rms_feedback_terms('spice name', 'ns', 1, 5)").fetchall()}
    cues = {**OFF, "feedback_docs": 1, "feedback_terms": 5}
    rows = dict(chat.sql("SELECT CAST(node_id AS VARCHAR), paths FROM rms_candidate_scores("
                         "'spice name', 'ns', 50, ngram_min := 1.0, cues := ?)",
                         params=[cues]).fetchall())
    assert rows[nid(6)] == ["FEEDBACK"]
    assert rows[nid(3)] == ["LEXICAL"]


def test_specificity_prefers_turns_that_name_things(chat):
    spec = dict(chat.sql("SELECT CAST(node_id AS VARCHAR), specificity "
                         "FROM rms_specificity('ns')").fetchall())
    assert spec[nid(6)] == 1.0 and 0.0 <= min(spec.values())


def test_scores_stay_in_unit_range_with_every_cue(chat):
    scores = [s for (s,) in ids(chat, "What did Ana adopt in March 2024?", None,
                                 column="score")]
    assert scores and all(0.0 <= s <= 1.0 for s in scores)
    assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("cues, message", [
    ({"speaker": 2.0}, "ranking cue 'speaker' must be a number in [0, 1]"),
    ({"neighbours": -1}, "ranking cue 'neighbours' must be a whole number >= 0"),
    ({"neighbors": 1}, "unknown ranking cue 'neighbors'"),
    ("fast", "ranking cues must be a mapping"),
])
def test_cue_validation_in_python(cues, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_cues(cues)


def test_cue_validation_in_sql(chat):
    with pytest.raises(Exception, match=re.escape("ranking cues out of range")):
        ids(chat, "greyhound", {"speaker": 3.0})


@pytest.mark.slow
def test_cli_cues_and_language(tmp_path, capsys):
    example = "examples/eval_conversations.jsonl"
    out = tmp_path / "r.json"
    assert main(["eval", example, "--limit", "3", "--orderings", "balanced", "--policies",
                 "highest_fit", "--budgets", "2k", "--quiet", "--cues", "off",
                 "--language", "none", "--json", str(out)]) == 0
    assert json.loads(out.read_text(encoding="utf-8"))["results"]
    capsys.readouterr()
    assert main(["eval", example, "--cues", "{speaker"]) != 0
    assert "--cues must be a JSON object" in capsys.readouterr().err


def test_your_own_embeddings_plug_into_the_vector_path(chat):
    """docs/ranking.md: copy vectors from your own table into rms_nodes.embedding, then pass
    the question's vector as query_embedding (no model is downloaded or called)."""
    chat.execute("CREATE TEMP TABLE my_vectors AS SELECT * FROM (VALUES "
                 "(?::UUID, [0.9, 0.1, 0.0]), (?::UUID, [0.0, 1.0, 0.0])) AS v(node_id, vec)",
                 [nid(7), nid(4)])
    chat.execute("UPDATE rms_nodes SET embedding = v.vec FROM my_vectors AS v "
                 "WHERE v.node_id = rms_nodes.id")
    rows = chat.sql("SELECT CAST(node_id AS VARCHAR), paths, vector FROM rms_candidate_scores("
                    "'transport', 'ns', 3, query_embedding := [1.0, 0.0, 0.0], cues := ?)",
                    params=[OFF]).fetchall()
    assert rows[0][0] == nid(7) and rows[0][1] == ["VECTOR"] and rows[0][2] > 0.99


@pytest.mark.slow
def test_plain_duckdb_client_stems_with_the_index_vocabulary(tmp_path):
    """Without rms_duck's Python UDF, rms_stem() looks words up in rms_lexical_stems: the
    persistent ranking macros still rank, and forms the index saw still meet."""
    import duckdb

    import rms_duck

    path = str(tmp_path / "m.duckdb")
    con = rms_duck.connect(path)
    add(con, 1, "I adopted two greyhounds", speaker="Ana")
    add(con, 2, "The weather was grey", speaker="Ben")
    refresh_index(con)
    con.close()
    plain = duckdb.connect(path)
    try:
        assert plain.execute("SELECT rms_stem('adopted'), rms_stem('unseen')").fetchall() == [
            ("adopt", "unseen")]
        rows = plain.execute("SELECT id FROM rms_candidates('Ana adopted greyhounds', 'ns')"
                             ).fetchall()
        assert rows[0][0] == nid(1)
    finally:
        plain.close()


@pytest.mark.parametrize("zone", ["America/New_York", "Asia/Tokyo"])
def test_month_window_reads_event_time_in_utc_whatever_the_session_zone(con, zone):
    # 2024-03-01 02:00 UTC is still February in New York; 2024-02-29 20:00 UTC is already
    # March in Tokyo. The context prints dates in UTC, so the TIME cue must read UTC too.
    add(con, 1, "Ana went hiking", speaker="Ana",
        event_time=datetime(2024, 3, 1, 2, tzinfo=UTC))
    add(con, 2, "Ana went swimming", speaker="Ana",
        event_time=datetime(2024, 2, 29, 20, tzinfo=UTC))
    refresh_index(con)
    cues = {**OFF, "time": 0.5}

    def in_march():
        rows = con.sql("SELECT CAST(node_id AS VARCHAR), paths FROM rms_candidate_scores("
                       "'What did Ana do in March 2024?', 'ns', 50, ngram_min := 1.0, "
                       "cues := ?)", params=[cues]).fetchall()
        return {k for k, paths in rows if "TIME" in paths}

    assert in_march() == {nid(1)}
    con.execute(f"SET TimeZone = '{zone}'")
    assert in_march() == {nid(1)}


@pytest.mark.parametrize("call", ["refresh", "language"])
def test_refreshing_a_read_only_store_says_what_to_do(tmp_path, call):
    """rms_candidates' stale-index error says to run refresh_index(con); on a read-only
    connection that raised DuckDB's "Cannot execute statement of type DELETE ... read-only
    mode", naming neither the call nor a way out."""
    from rms_duck.errors import DatabaseOpenError

    path = str(tmp_path / "store.duckdb")
    writable = rms_duck.connect(path)
    add(writable, 1, "The Heron cut-over moved to Friday")
    writable.close()
    con = rms_duck.connect(path, read_only=True)
    try:
        with pytest.raises(DatabaseOpenError, match=r"^cannot (refresh the lexical index|change "
                                                    r"the index language): the database is "
                                                    r"open read-only; open it writable with "
                                                    r"rms_duck.connect\(path\)"):
            if call == "refresh":
                refresh_index(con)
            else:
                set_index_language(con, "none", stopwords=[])
        assert con.execute("SELECT count(*) FROM rms_candidates('heron', stale_ok := true)"
                           ).fetchall() == [(0,)]
    finally:
        con.close()

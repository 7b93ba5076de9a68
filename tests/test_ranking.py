"""Ranking in SQL (sql/ranking.sql): BM25, trigram and vector paths, pins and tasks, the merge."""

from __future__ import annotations

import math
import re
import uuid

import duckdb
import pytest

import rms_duck
from rms_duck.duck.ranking import RankingCues, RankingWeights, parse_weights, refresh_index
from rms_duck.duck.sqlfiles import read_sql
from rms_duck.errors import ConfigError


def nid(i: int) -> str:
    return str(uuid.UUID(int=i))


def add(con, i: int, content: str, namespace: str = "ns", **fields) -> None:
    columns = {"id": nid(i), "namespace_id": namespace, "content": content, **fields}
    marks = ", ".join("?" for _ in columns)
    con.execute(f"INSERT INTO rms_nodes ({', '.join(columns)}) VALUES ({marks})",
                list(columns.values())).fetchall()


def bm25(tf: int, dl: int, avgdl: float, n_docs: int, df: int) -> float:
    """The textbook formula, k1 = 1.2, b = 0.75, idf = ln(1 + (N - n + 0.5) / (n + 0.5))."""
    idf = math.log(1 + (n_docs - df + 0.5) / (df + 0.5))
    return idf * tf * 2.2 / (tf + 1.2 * (1 - 0.75 + 0.75 * dl / avgdl))


@pytest.fixture
def three(con):
    # Lengths after stopwords ("the" is one): 3, 2, 4 words; avgdl = 3.
    add(con, 1, "apple banana apple")
    add(con, 2, "Banana, cherry!")
    add(con, 3, "The cherry date elderberry fig")
    refresh_index(con)
    return con


def test_bm25_exact_values_on_three_documents(three):
    got = dict(three.sql("SELECT CAST(node_id AS VARCHAR), bm25 "
                         "FROM rms_bm25('apple cherry', 'ns')").fetchall())
    expected = {
        nid(1): bm25(tf=2, dl=3, avgdl=3, n_docs=3, df=1),                 # apple x2
        nid(2): bm25(tf=1, dl=2, avgdl=3, n_docs=3, df=2),                 # cherry
        nid(3): bm25(tf=1, dl=4, avgdl=3, n_docs=3, df=2),                 # cherry
    }
    assert got.keys() == expected.keys()
    for key, value in expected.items():
        assert got[key] == pytest.approx(value, rel=1e-12)


def test_bm25_sums_query_terms_and_ignores_stopwords_and_repeats(three):
    [(score,)] = three.sql(
        "SELECT bm25 FROM rms_bm25('the BANANA banana apple', 'ns') WHERE node_id = ?",
        params=[nid(1)]).fetchall()
    assert score == pytest.approx(bm25(tf=2, dl=3, avgdl=3, n_docs=3, df=1)
                                  + bm25(tf=1, dl=3, avgdl=3, n_docs=3, df=2), rel=1e-12)


def test_bm25_k1_b_are_parameters(three):
    [(score,)] = three.sql(
        "SELECT bm25 FROM rms_bm25('apple', 'ns', k1 := 2.0, b := 0.0)").fetchall()
    idf = math.log(1 + 2.5 / 1.5)
    assert score == pytest.approx(idf * 2 * 3.0 / (2 + 2.0), rel=1e-12)


def test_ngram_similarity_is_trigram_set_cosine(con):
    add(con, 1, "cat")
    refresh_index(con)
    # ' cats ' -> { ca, cat, ats, ts } and ' cat ' -> { ca, cat, at }: 2 shared.
    [(sim,)] = con.sql("SELECT similarity FROM rms_ngram_similarity('cats', 'ns')").fetchall()
    assert sim == pytest.approx(2 / math.sqrt(4 * 3))
    assert con.sql("SELECT rms_char_ngrams('Cat cat')").fetchall() == [([" ca", "cat", "at "],)]


def test_refresh_is_incremental(con):
    add(con, 1, "alpha beta")
    add(con, 2, "gamma")
    assert refresh_index(con) == rms_duck.duck.ranking.IndexRefresh(indexed=2, dropped=0)
    assert refresh_index(con) == rms_duck.duck.ranking.IndexRefresh(indexed=0, dropped=0)
    status = "SELECT * FROM rms_lexical_index_status()"
    assert con.sql(status).fetchall() == [(2, 0, 0, 0)]
    con.execute("UPDATE rms_nodes SET content = 'delta epsilon' WHERE id = ?", [nid(1)]).fetchall()
    con.execute("DELETE FROM rms_nodes WHERE id = ?", [nid(2)]).fetchall()
    add(con, 3, "gamma rays")
    assert con.sql(status).fetchall() == [(0, 1, 1, 1)]
    assert refresh_index(con) == rms_duck.duck.ranking.IndexRefresh(indexed=2, dropped=2)
    terms = con.sql("SELECT term FROM rms_lexical_terms ORDER BY term").fetchall()
    assert terms == [("delta",), ("epsilon",), ("gamma",), ("ray",)]  # stems
    assert refresh_index(con, full=True).indexed == 2


def test_merge_paths_counts_and_contradicts(con):
    add(con, 1, "the budget meeting moved to friday", salience=0.4)
    add(con, 2, "always answer in metric units", pinned=True)
    add(con, 3, "prepare budget slides", type="task", lifecycle_state="stable")
    add(con, 4, "old budget meeting notes", lifecycle_state="archived")
    add(con, 5, "budget meeting in another namespace", namespace="other")
    add(con, 6, "unrelated words entirely", embedding=[1.0, 0.0])
    add(con, 7, "the budget meeting was cancelled")
    con.execute("INSERT INTO rms_edges (source_id, target_id, kind) VALUES (?, ?, 'CONTRADICTS')",
                [nid(7), nid(1)]).fetchall()
    refresh_index(con)
    rows = con.sql(
        "SELECT id, paths, path_count, contradicts, score FROM rms_candidates("
        "'budget meeting', 'ns', 10, query_embedding := [0.6, 0.8])").fetchall()
    got = {row[0]: row[1:4] for row in rows}
    # path_count counts retrievers: the words (LEXICAL and its NGRAM variant) are one.
    assert got == {
        nid(1): (["LEXICAL", "NGRAM"], 1, [nid(7)]),
        nid(7): (["LEXICAL", "NGRAM"], 1, [nid(1)]),
        nid(3): (["ACTIVE_TASK", "LEXICAL", "NGRAM"], 2, []),
        nid(2): (["PINNED"], 1, []),
        nid(6): (["VECTOR"], 1, []),
    }
    scores = [row[4] for row in rows]
    assert scores == sorted(scores, reverse=True)
    assert all(0.0 <= s <= 1.0 for s in scores)


OFF = RankingCues.off().as_struct()


def test_composite_score_uses_the_weights(con):
    add(con, 1, "apple pie", salience=0.2)
    add(con, 2, "apple", salience=0.6)
    refresh_index(con)
    # Without a query embedding the vector weight is shared out: 0.45/0.8, 0.25/0.8, 0.1/0.8.
    rows = con.sql("SELECT CAST(node_id AS VARCHAR), score, lexical, ngram, salience "
                   "FROM rms_candidate_scores('apple', 'ns', cues := ?)", params=[OFF]).fetchall()
    for _, score, lexical, ngram, salience in rows:
        assert score == pytest.approx((0.45 * lexical + 0.25 * ngram + 0.1 * salience) / 0.8)
    weights = {"lexical": 0.5, "ngram": 0.0, "vector": 0.0, "salience": 0.5}
    rows = con.sql("SELECT score, lexical, salience FROM rms_candidate_scores('apple', 'ns', "
                   "weights := ?, cues := ?)", params=[weights, OFF]).fetchall()
    for score, lexical, salience in rows:
        assert score == pytest.approx(0.5 * lexical + 0.5 * salience)


def test_weights_must_sum_to_one_in_sql(con):
    add(con, 1, "apple")
    refresh_index(con)
    with pytest.raises(Exception, match=re.escape("ranking weights must be >= 0 and sum to 1")):
        con.sql("SELECT * FROM rms_candidates('apple', weights := {'lexical': 0.7})").fetchall()


def test_ranking_weights_validation_in_python():
    assert parse_weights(None) == RankingWeights()
    assert parse_weights({"lexical": 0.5, "ngram": 0.5}).as_struct() == {
        "lexical": 0.5, "ngram": 0.5, "vector": 0.0, "salience": 0.0}
    with pytest.raises(ConfigError, match="must sum to 1, got 1.2"):
        RankingWeights(lexical=0.6, ngram=0.3, vector=0.2, salience=0.1)
    with pytest.raises(ConfigError, match="'vector' must be a number in \\[0, 1\\], got -0.1"):
        RankingWeights(lexical=0.9, ngram=0.1, vector=-0.1, salience=0.1)
    with pytest.raises(ConfigError, match="unknown ranking weight 'lexcial'"):
        parse_weights({"lexcial": 1.0})


def test_whole_retrieval_in_one_select(con, enc):
    add(con, 1, "Maya moved the cut-over to December 19", speaker="Maya")
    add(con, 2, "The storage contract is signed")
    add(con, 3, "Pinned: answer in metric units", pinned=True)
    refresh_index(con)
    [(bundle,)] = con.sql("SELECT pack_context(list(c), 4096) FROM rms_candidates('cut-over') c"
                          ).fetchall()
    assert bundle["tokens_used"] == len(enc.encode_ordinary(bundle["context"]))
    assert {r["id"] for r in bundle["included"]} == {nid(1), nid(3)}


def test_python_pack_accepts_the_table_macro(con):
    add(con, 1, "the cut-over moved to December 19")
    refresh_index(con)
    bundle = rms_duck.pack(con, "SELECT * FROM rms_candidates(?, ?, ?)", budget=1000,
                           params=["cut-over", "ns", 5], store=False)
    assert bundle.included_ids == [nid(1)]


def test_a_stale_index_under_the_callers_open_transaction_says_to_commit(con):
    # pack() refreshes a stale index in a transaction of its own. Its BEGIN inside the
    # caller's open transaction raised DuckDB's bare "cannot start a transaction within a
    # transaction" and aborted the caller's, whose COMMIT then dropped its row silently.
    con.begin()
    add(con, 1, "the cut-over moved to December 19")
    with pytest.raises(duckdb.TransactionException,
                       match="has a transaction open; COMMIT or ROLLBACK it first"):
        rms_duck.pack(con, "SELECT * FROM rms_candidates(?, ?)", budget=1000,
                      params=["cut-over", "ns"], store=False)
    con.commit()  # the caller's transaction is untouched: its row is kept
    bundle = rms_duck.pack(con, "SELECT * FROM rms_candidates(?, ?)", budget=1000,
                           params=["cut-over", "ns"], store=False)
    assert bundle.included_ids == [nid(1)]


def test_empty_and_unmatched_queries_return_only_pins_and_tasks(con):
    add(con, 1, "apple")
    add(con, 2, "pinned rule", salience=1.0)
    refresh_index(con)
    for query in ("", "zebra", None):
        rows = con.sql("SELECT id, paths FROM rms_candidates(?, 'ns')", params=[query]).fetchall()
        assert rows == [(nid(2), ["PINNED"])]


def test_every_ranking_macro_has_a_comment(con):
    names = set(re.findall(r"CREATE OR REPLACE (?:TEMP )?MACRO (\w+)", read_sql("ranking.sql")))
    rows = dict(con.sql("SELECT function_name, any_value(comment) FROM duckdb_functions() "
                        "WHERE function_name LIKE 'rms_%' GROUP BY ALL").fetchall())
    assert names and all(rows.get(name) for name in names), names - set(rows)


def test_schema_adds_the_embedding_column_idempotently(con):
    con.execute(read_sql("schema.sql")).fetchall()
    columns = con.sql("SELECT column_name, data_type FROM duckdb_columns() "
                      "WHERE table_name = 'rms_nodes' AND column_name = 'embedding'").fetchall()
    assert columns == [("embedding", "FLOAT[]")]


@pytest.mark.slow
def test_materialized_ctes_rank_exactly_as_unmarked_ones():
    """The ranking macros mark every CTE MATERIALIZED: DuckDB then plans each once instead
    of weighing, for every CTE, whether to inline it (most of a ranking query's time was
    planning). It is a plan, not a result: the same macros with unmarked CTEs (DuckDB's
    default) return the same rows, bit for bit, with pins, cues (speaker, time), feedback,
    session neighbours and the vector path."""
    from rms_duck.duck.macros import temp_sql
    from rms_duck.evaluation.loader import load_conversations
    from rms_duck.evaluation.runner import store_turns

    shipped = read_sql("ranking.sql")
    assert shipped.count(" AS MATERIALIZED (") > 40
    conversations = load_conversations("examples/eval_conversations.jsonl")
    stores = []
    for unmarked in (False, True):
        con = rms_duck.connect()
        store_turns(con, conversations)
        con.execute("UPDATE rms_nodes SET pinned = true WHERE hash(content) % 40 = 0")
        con.execute("UPDATE rms_nodes SET embedding = [length(content) % 7, 1.0, "
                    "length(content) % 3] WHERE length(content) % 2 = 0")
        refresh_index(con)
        if unmarked:  # TEMP macros shadow the stored ones; python_macros.sql shadows rms_stem
            con.execute(temp_sql("ranking.sql").replace(" AS MATERIALIZED (", " AS ("))
            con.execute(read_sql("python_macros.sql"))
        stores.append(con)
    sql = ("SELECT * FROM rms_candidates(?, ?, k := 300, ngram_min := 0, "
           "query_embedding := ?)")
    paths: set[str] = set()
    for conversation in conversations:
        [(month,)] = stores[0].execute(
            "SELECT strftime(min(event_time), '%B %Y') FROM rms_nodes WHERE namespace_id = ?",
            [conversation.conversation_id]).fetchall()
        questions = [q.question for q in conversation.questions[:2]]
        for question in [*questions, f"What did they talk about in {month}?"]:
            for vector in (None, [1.0, 0.5, 0.0]):
                params = [question, conversation.conversation_id, vector]
                materialized, unmarked_rows = (con.execute(sql, params).fetchall()
                                               for con in stores)
                assert materialized == unmarked_rows, question
                paths.update(path for row in materialized for path in row[4])
    assert {"PINNED", "TIME", "SPEAKER", "LEXICAL", "NGRAM", "FEEDBACK", "VECTOR",
            "SESSION_CONTEXT"} <= paths, paths


def test_a_child_forked_while_another_thread_refreshes_can_rank():
    """Index refreshes take turns on a process-wide lock (41d488d); a fork taken while
    another thread held it copied it held by a thread the child does not have, so the
    child's first rms_candidates pack (or refresh_index) waited for ever, as the packing
    lock once did (tests/test_bulk.py)."""
    import os
    import signal

    from rms_duck.duck import ranking

    from .conftest import held_on_another_thread

    with held_on_another_thread(ranking._REFRESH_LOCK):  # another thread, mid-refresh
        pid = os.fork()
        if pid == 0:
            signal.alarm(20)  # a hung child dies of SIGALRM instead of hanging the test
            try:
                child = rms_duck.connect()
                add(child, 1, "heron note")
                bundle = rms_duck.pack(child, "SELECT * FROM rms_candidates(?)",
                                       params=["heron"], budget=300, store=False)
                os._exit(0 if bundle.included_ids == [nid(1)] else 1)
            except BaseException:  # noqa: BLE001 - the exit status reports it
                os._exit(2)
        _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status

"""The ranking-query guard: one read-only SELECT, allow-listed, transpiled, fingerprinted,
and then run inside a READ ONLY transaction as a second wall."""

from __future__ import annotations

import json
import uuid

import duckdb
import pytest

import rms_duck
from rms_duck.duck.api import _run_read_only
from rms_duck.duck.query import check_query
from rms_duck.errors import QueryRejectedError

FIX = "pass one read-only SELECT over your tables"

# (id, SQL, what the message must name)
REJECTED = [
    ("create-table", "CREATE TABLE x AS SELECT 1", "CREATE statement"),
    ("create-view", "CREATE VIEW v AS SELECT 1", "CREATE statement"),
    ("create-macro", "CREATE MACRO m(a) AS a", "CREATE statement"),
    ("drop", "DROP TABLE rms_nodes", "DROP statement"),
    ("alter", "ALTER TABLE rms_nodes ADD COLUMN z INT", "ALTER statement"),
    ("truncate", "TRUNCATE rms_nodes", "TRUNCATETABLE statement"),
    ("insert", "INSERT INTO rms_nodes (id, content) VALUES (uuid(), 'x')", "INSERT statement"),
    ("update", "UPDATE rms_nodes SET content = 'x'", "UPDATE statement"),
    ("delete", "DELETE FROM rms_nodes", "DELETE statement"),
    ("merge", "MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE", "MERGE statement"),
    ("writable-cte", "WITH d AS (DELETE FROM rms_nodes RETURNING *) SELECT * FROM d",
     "DELETE clause"),
    ("copy-to", "COPY rms_nodes TO '/tmp/x.csv'", "COPY statement"),
    ("copy-from", "COPY rms_nodes FROM '/tmp/x.csv'", "COPY statement"),
    ("copy-query", "COPY (SELECT 1) TO '/tmp/x.csv'", "COPY statement"),
    ("attach", "ATTACH '/tmp/other.db' AS other", "ATTACH statement"),
    ("detach", "DETACH other", "DETACH statement"),
    ("install", "INSTALL httpfs", "INSTALL statement"),
    ("install-from", "INSTALL httpfs FROM community", "INSTALL statement"),
    ("load", "LOAD httpfs", "LOAD statement"),
    ("load-path", "LOAD '/tmp/evil.duckdb_extension'", "LOAD statement"),
    ("pragma", "PRAGMA database_list", "PRAGMA statement"),
    ("set", "SET memory_limit = '1GB'", "SET statement"),
    ("set-variable", "SET VARIABLE x = 1", "SET statement"),
    ("reset", "RESET memory_limit", "RESET statement"),
    ("call", "CALL pragma_version()", "CALL statement"),
    ("export", "EXPORT DATABASE '/tmp/dump'", "EXPORT statement"),
    ("import", "IMPORT DATABASE '/tmp/dump'", "IMPORT statement"),
    ("checkpoint", "CHECKPOINT", "CHECKPOINT statement"),
    ("checkpoint-db", "CHECKPOINT mydb", "CHECKPOINT statement"),
    ("force-checkpoint", "FORCE CHECKPOINT", "FORCE statement"),
    ("vacuum", "VACUUM", "VACUUM statement"),
    ("begin", "BEGIN TRANSACTION", "TRANSACTION statement"),
    ("commit", "COMMIT", "COMMIT statement"),
    ("use", "USE other", "USE statement"),
    ("describe", "DESCRIBE rms_nodes", "DESCRIBE statement"),
    ("summarize", "SUMMARIZE rms_nodes", "SUMMARIZE statement"),
    ("explain-analyze", "EXPLAIN ANALYZE DELETE FROM rms_nodes", "EXPLAIN statement"),
    ("pivot", "PIVOT rms_nodes ON type USING count(*)", "PIVOT statement"),
    ("create-secret", "CREATE SECRET s (TYPE s3, KEY_ID 'x')", "CREATE statement"),
    ("select-into", "SELECT * INTO t2 FROM rms_nodes", "SELECT ... INTO"),
    ("select-into-postgres", "SELECT 1 INTO t", "SELECT ... INTO"),
    ("read-csv", "SELECT * FROM read_csv('/etc/passwd')", "READ_CSV"),
    ("read-csv-auto", "SELECT * FROM read_csv_auto('/etc/passwd')", "read_csv_auto"),
    ("read-parquet", "SELECT * FROM read_parquet('s3://b/x.parquet')", "READ_PARQUET"),
    ("parquet-scan", "SELECT * FROM parquet_scan('/x.parquet')", "parquet_scan"),
    ("read-json", "SELECT * FROM read_json('x.json')", "read_json"),
    ("read-text", "SELECT * FROM read_text('/etc/passwd')", "read_text"),
    ("read-blob", "SELECT * FROM read_blob('/etc/passwd')", "read_blob"),
    ("quoted-read-csv", "SELECT * FROM \"read_csv\"('/etc/passwd')", "READ_CSV"),
    ("schema-read-text", "SELECT * FROM main.read_text('/etc/passwd')", "read_text"),
    ("glob", "SELECT * FROM glob('/etc/*')", "glob"),
    ("sniff-csv", "SELECT * FROM sniff_csv('/etc/passwd')", "sniff_csv"),
    ("query-fn", "SELECT * FROM query('DROP TABLE x')", "query"),
    ("query-table", "SELECT * FROM query_table('rms_nodes')", "query_table"),
    ("checkpoint-fn", "SELECT * FROM checkpoint()", "checkpoint"),
    ("serialized-sql", "SELECT * FROM json_execute_serialized_sql('x')",
     "json_execute_serialized_sql"),
    ("secrets", "SELECT * FROM duckdb_secrets()", "duckdb_secrets"),
    ("sqlite-scan", "SELECT * FROM sqlite_scan('/x.db', 't')", "sqlite_scan"),
    ("unknown-table-fn", "SELECT * FROM read_xlsx('/x.xlsx')", "read_xlsx"),
    ("joined-file", "SELECT * FROM rms_nodes JOIN read_text('/x') ON true", "read_text"),
    ("lateral-file", "SELECT * FROM rms_nodes, LATERAL (SELECT * FROM read_text(content))",
     "read_text"),
    ("subquery-file", "SELECT id FROM rms_nodes WHERE id IN (SELECT id FROM read_csv('/x'))",
     "READ_CSV"),
    ("cte-file", "WITH f AS (SELECT * FROM read_parquet('/x.parquet')) SELECT * FROM f",
     "READ_PARQUET"),
    ("union-file", "SELECT id FROM rms_nodes UNION ALL SELECT * FROM read_csv('/x')",
     "READ_CSV"),
    ("quoted-path", "SELECT * FROM '/etc/passwd'", "a file or URL in FROM"),
    ("quoted-csv", "SELECT * FROM 'data.csv'", "a file or URL in FROM"),
    ("url", "SELECT * FROM 'https://example.com/x.parquet'", "a file or URL in FROM"),
    ("from-first-path", "FROM '/etc/passwd'", "a file or URL in FROM"),
    ("identifier-path", 'SELECT * FROM "data.parquet"', "a file or URL in FROM"),
    ("getvariable", "SELECT getvariable('x')", "the function getvariable"),
    ("nextval", "SELECT nextval('s')", "the function nextval"),
    ("setseed", "SELECT setseed(0.5)", "the function setseed"),
    ("pack-context", "SELECT pack_context([], 100)", "the function pack_context"),
    ("rms-store", "SELECT rms_store([], 100)", "the function rms_store"),
    ("rms-store-udf", "SELECT rms_store_udf([], 100, NULL, NULL, NULL, 1)",
     "the function rms_store_udf"),
]


@pytest.mark.parametrize("sql, named", [pytest.param(s, n, id=i) for i, s, n in REJECTED])
def test_rejected(sql, named):
    with pytest.raises(QueryRejectedError) as info:
        check_query(sql)
    message = str(info.value)
    assert named in message and FIX in message
    assert repr(sql[:40])[1:-1][:30] in message  # the message shows the query


@pytest.mark.parametrize("sql, count", [
    ("SELECT 1; DROP TABLE rms_nodes", 2), ("SELECT 1; SELECT 2", 2),
    ("SELECT 1;;SELECT 2;", 2), ("-- only a comment", 0),
])
def test_exactly_one_statement(sql, count):
    with pytest.raises(QueryRejectedError,
                       match=f"must be exactly one statement, got {count} in"):
        check_query(sql)


@pytest.mark.parametrize("value", ["", "   ", None, 42])
def test_empty_or_non_text_query(value):
    with pytest.raises(QueryRejectedError, match="must be one SELECT statement, got"):
        check_query(value)


def test_unparseable_select_shows_the_query_and_the_fix():
    with pytest.raises(QueryRejectedError,
                       match=r"could not be parsed as duckdb SQL: .* in 'SELECT \(\(1'; pass one"):
        check_query("SELECT ((1")


def test_unknown_dialect():
    with pytest.raises(QueryRejectedError, match="unknown SQL dialect 'klingon'.*'postgres'"):
        check_query("SELECT 1", dialect="klingon")


RANKING = """
WITH recent AS (
    SELECT n.id, n.content, n.salience, n.created_at,
           row_number() OVER (PARTITION BY n.type ORDER BY n.created_at DESC) AS recency,
           count(e.target_id) OVER (PARTITION BY n.id) AS links
    FROM rms_nodes AS n
    LEFT JOIN rms_edges AS e ON e.source_id = n.id
),
scored AS (
    SELECT id, content, 0.5 * salience + 0.5 / recency AS raw, links
    FROM recent
)
SELECT DISTINCT CAST(s.id AS VARCHAR) AS id, s.raw / max(s.raw) OVER () AS score, s.content,
       percent_rank() OVER (ORDER BY s.raw) AS pct
FROM scored AS s JOIN rms_nodes AS n2 ON n2.id = s.id
ORDER BY score DESC, id
"""


def nodes(con, n: int = 4) -> list[str]:
    ids = [str(uuid.UUID(int=i + 1)) for i in range(n)]
    con.executemany(
        "INSERT INTO rms_nodes (id, content, salience, type, pinned) VALUES (?, ?, ?, ?, ?)",
        [[node, f"note {i} about the release", 0.2 + 0.1 * i, "fact", i == 0]
         for i, node in enumerate(ids)])
    con.execute("INSERT INTO rms_edges VALUES (?, ?, 'SUPPORTS', now())", [ids[0], ids[1]])
    return ids


def test_ranking_query_with_ctes_windows_and_a_join_is_accepted_and_packs(con):
    ids = nodes(con)
    checked = check_query(RANKING)
    assert checked.sql.startswith("WITH recent AS")
    bundle = rms_duck.pack(con, RANKING, budget=500, session_id="s")
    assert sorted(bundle.included_ids) == sorted(ids)
    receipt = json.loads(con.execute("SELECT receipt FROM rms_receipts").fetchall()[0][0])
    assert receipt["query"] == checked.to_dict()
    assert receipt["query"]["dialect"] == "duckdb" and len(receipt["query"]["fingerprint"]) == 64
    assert con.execute("SELECT query_text FROM rms_bundles").fetchall() == [(checked.canonical,)]


@pytest.mark.parametrize("sql", [
    "SELECT * FROM range(3) AS t(i)", "SELECT * FROM generate_series(1, 3)",
    "SELECT * FROM unnest([1, 2])", "SELECT * FROM json_each('{\"a\": 1}')",
    "SELECT * FROM (VALUES (1)) AS v(x)", "SELECT * FROM rms_bm25('release')",
    "SELECT id FROM rms_nodes INTERSECT SELECT source_id FROM rms_edges",
    "SELECT 'a/b.csv' AS path FROM rms_nodes",
])
def test_allowed_table_functions_and_set_operations(sql):
    check_query(sql)


def test_canonical_form_and_literal_free_fingerprint():
    a = check_query("select  ID , Score from MEM where score>0.5 -- hi")
    b = check_query("SELECT id, score\nFROM mem\nWHERE score > 0.5")
    c = check_query("SELECT id, score FROM mem WHERE score > 0.9")
    d = check_query("SELECT id, score FROM mem WHERE salience > 0.5")
    assert a.canonical == b.canonical == "SELECT id, score FROM mem WHERE score > 0.5"
    assert a.fingerprint == b.fingerprint == c.fingerprint != d.fingerprint
    assert a.canonical != c.canonical


TRANSPILED = [
    ("postgres",
     ("SELECT id::text AS id, (CASE WHEN pinned THEN 0.9 ELSE salience END)::float8 AS score, "
      "content FROM rms_nodes WHERE created_at <= now() ORDER BY score DESC"),
     ["CAST(id AS TEXT)", "CURRENT_TIMESTAMP"]),
    ("snowflake",
     ("SELECT TO_VARCHAR(id) AS id, IFF(pinned, 0.9, salience) AS score, content "
      "FROM rms_nodes WHERE created_at > DATEADD(day, -30, CURRENT_TIMESTAMP()) "
      "ORDER BY score DESC"),
     ["CASE WHEN pinned THEN 0.9 ELSE salience END", "NULLS FIRST"]),
    ("bigquery",
     ("SELECT CAST(id AS STRING) AS id, IF(pinned, 0.9, salience) AS score, content "
      "FROM `rms_nodes` WHERE created_at > TIMESTAMP_SUB(CURRENT_TIMESTAMP(), INTERVAL 30 DAY)"),
     ['FROM "rms_nodes"', "INTERVAL"]),
]


@pytest.mark.parametrize("dialect, sql, expected", TRANSPILED, ids=[t[0] for t in TRANSPILED])
def test_transpiled_from_other_dialects_then_packed(con, dialect, sql, expected):
    ids = nodes(con)
    checked = check_query(sql, dialect=dialect)
    assert all(part in checked.sql for part in expected), checked.sql
    bundle = rms_duck.pack(con, sql, budget=500, dialect=dialect)
    assert sorted(bundle.included_ids) == sorted(ids)
    assert {r.id: r.score for r in bundle.included}[ids[0]] == 0.9  # the pinned node
    receipt = json.loads(con.execute("SELECT receipt FROM rms_receipts").fetchall()[0][0])
    assert receipt["query"]["dialect"] == dialect


@pytest.mark.parametrize("dialect, sql, named", [
    ("snowflake", "SELECT * FROM @mystage", "a file, stage or URL in FROM"),
    ("bigquery", "SELECT * FROM EXTERNAL_QUERY('conn', 'SELECT 1')", "EXTERNAL_QUERY"),
    ("postgres", "SELECT 1 INTO t", "SELECT ... INTO"),
    ("postgres", "SELECT 1; SELECT 2", "exactly one statement"),
])
def test_other_dialects_are_guarded_too(dialect, sql, named):
    with pytest.raises(QueryRejectedError, match=named.replace(".", r"\.")):
        check_query(sql, dialect=dialect)


def test_a_rejected_query_stores_nothing(con):
    with pytest.raises(QueryRejectedError):
        rms_duck.pack(con, "DELETE FROM rms_nodes", budget=200)
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]


# -- the second wall: READ ONLY transaction -----------------------------------------------

@pytest.mark.parametrize("sql", [
    "INSERT INTO rms_nodes (id, content) VALUES (uuid(), 'x')",
    "UPDATE rms_nodes SET content = 'changed'",
    "DELETE FROM rms_nodes",
    "CREATE TABLE evil AS SELECT 1",
    "DROP TABLE rms_edges",
])
def test_read_only_transaction_blocks_writes_the_guard_missed(con, sql):
    nodes(con, 2)
    with pytest.raises(duckdb.Error, match="read-only|read only"):
        _run_read_only(con, sql, None)
    assert con.execute("SELECT count(*), min(content) FROM rms_nodes").fetchall() == \
        [(2, "note 0 about the release")]
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'evil'"
                       ).fetchall() == [(0,)]
    assert rms_duck.pack(con, "SELECT CAST(id AS VARCHAR) AS id, 0.5 AS score, content "
                              "FROM rms_nodes", budget=300).included_ids


def test_read_only_transaction_runs_selects_with_parameters(con):
    nodes(con, 3)
    rows = _run_read_only(con, "SELECT CAST(id AS VARCHAR) AS id, 0.5 AS score, content "
                          "FROM rms_nodes WHERE salience > ? ORDER BY content", [0.25])
    from rms_duck.candidates import to_candidates

    assert [c.content for c in to_candidates(rows)] == ["note 1 about the release",
                                                        "note 2 about the release"]


def test_params_bind_as_duckdb_binds_them_a_dict_by_name():
    """list(params) bound a dict's keys as the values: params={"q": question} with ?
    placeholders ranked for the word 'q' without a word, and a $name query failed with
    DuckDB's "Mixing named and positional parameters". A string gave its letters."""
    from rms_duck.errors import ConfigError

    con = rms_duck.connect()
    con.execute("INSERT INTO rms_nodes (id, namespace_id, content) VALUES "
                "(uuid(), 'ns', 'The budget review is on Friday.'), "
                "(uuid(), 'ns', 'Gardening: the tomatoes need water.')")
    ranking = "SELECT * FROM rms_candidates({}, {})"
    by_name = rms_duck.pack(con, ranking.format("$q", "$ns"), budget=300, store=False,
                            params={"q": "budget review", "ns": "ns"})
    by_place = rms_duck.pack(con, ranking.format("?", "?"), budget=300, store=False,
                             params=("budget review", "ns"))
    assert by_name.context == by_place.context and "budget review" in by_name.context
    with pytest.raises(ConfigError, match=r"params is a dict .*, but the ranking query has 2 "
                                          r"\? placeholder\(s\), which take a list"):
        rms_duck.pack(con, ranking.format("?", "?"), budget=300, store=False,
                      params={"q": "budget review", "ns": "ns"})
    for bad in ("budget", 7):
        with pytest.raises(ConfigError, match=r"^params must be a list of values for the "
                                              r"query's \? placeholders \(or a dict for \$name "
                                              r"ones\), got (str 'budget'|int 7); pass for "
                                              r"example params=\[question, namespace\]$"):
            rms_duck.pack(con, ranking.format("?", "'ns'"), budget=300, store=False,
                          params=bad)
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]
    con.close()


@pytest.mark.parametrize("sql", ["SELECT * FROM read_parquet('notes.parquet')",
                                 "SELECT * FROM 'notes.parquet'",
                                 "SELECT * FROM read_csv_auto('notes.csv')"])
def test_a_ranking_query_over_a_file_is_refused_with_a_way_to_rank_the_file(sql):
    """An analyst's candidates in a Parquet file were refused with only "pass one read-only
    SELECT over your tables"; the refusal stays, and now says how to rank those rows."""
    with pytest.raises(QueryRejectedError) as info:
        check_query(sql, "duckdb")
    assert FIX in str(info.value)
    assert str(info.value).endswith(
        "; to rank a file's rows, pass them as a table: rms_duck.pack(con, "
        "con.read_parquet(path), budget=...) (or read_csv), or load them into a table of "
        "your own first")


@pytest.mark.parametrize("dialect", ["duckdb", "postgres"])
def test_a_placeholder_cast_is_a_placeholder_and_a_cast(dialect):
    """sqlglot reads `?::` as Databricks' try-cast operator in every dialect, so
    WHERE ts > ?::TIMESTAMP was refused as "could not be parsed as duckdb SQL"."""
    sql = ("SELECT ?::VARCHAR AS id, ?::DOUBLE AS score, 'x' AS content "
           "WHERE 1 = ?::INT AND '?::' <> ?")
    checked = check_query(sql, dialect)
    assert checked.sql == ("SELECT CAST(? AS TEXT) AS id, CAST(? AS DOUBLE) AS score, 'x' AS "
                           "content WHERE 1 = CAST(? AS INT) AND '?::' <> ?")
    con = rms_duck.connect()
    try:
        bundle = rms_duck.pack(con, sql, budget=300, params=["n1", "0.4", "1", "y"],
                               dialect=dialect, store=False)
        assert bundle.included_ids == ["n1"] and bundle.included[0].score == 0.4
    finally:
        con.close()
    with pytest.raises(QueryRejectedError, match="could not be parsed"):
        check_query("SELECT ?::", dialect)


def test_a_lone_surrogate_in_the_query_text_is_named_with_its_place():
    """DuckDB refused it with "Python Conversion Failure: cannot encode str as UTF-8"
    (an MCP agent's pack_query sql with a JSON "\\ud800" escape)."""
    sql = "SELECT 'a' AS id, 0.5 AS score, 'x\ud800' AS content"
    with pytest.raises(QueryRejectedError, match=r"lone surrogate \('\\ud800' at character "
                       r"34, half of a UTF-16 pair\)"):
        check_query(sql)
    con = rms_duck.connect()
    try:
        with pytest.raises(QueryRejectedError, match="lone surrogate"):
            rms_duck.pack(con, sql, budget=300, store=False)
    finally:
        con.close()


@pytest.mark.parametrize(("query", "params", "message"), [
    # DuckDB's own words named neither params nor the fix: "Values were not provided for
    # the following parameters: 1, 2", "Parameter argument/count mismatch, identifiers of
    # the excess parameters: 3", "Mixing named and positional parameters is not supported".
    ("SELECT * FROM rms_candidates(?, ?)", None,
     r"^params gives 0 value\(s\) \[\], but the ranking query has 2 \? placeholder\(s\); "
     r"pass a list of 2 value\(s\), one per \?, in order, for example params=\[question, "
     r"namespace\] for rms_candidates\(\?, \?\)$"),
    ("SELECT * FROM rms_candidates(?, ?)", ["heron"], r"^params gives 1 value\(s\) \['heron'\]"),
    ("SELECT * FROM rms_candidates(?, ?)", ["heron", "ns", 3], r"gives 3 value\(s\)"),
    ("SELECT * FROM rms_candidates($q, $ns)", ["heron", "ns"],
     r"^params is a list \['heron', 'ns'\], but the ranking query has \$name placeholders "
     r"\(\$ns, \$q\); pass a dict, for example params=\{'ns': \.\.\., 'q': \.\.\.\}$"),
    ("SELECT * FROM rms_candidates($q, $ns)", {"q": "heron", "n": "ns"},
     r"^params must give a value for each \$name placeholder of the ranking query \(\$ns, "
     r"\$q\), got keys \['n', 'q'\]; add 'ns'; drop 'n'$"),
    ("SELECT * FROM rms_candidates('heron')", ["heron"],
     r"^params gives 1 value\(s\) \['heron'\], but the ranking query has no placeholder; "
     r"leave params out"),
])
def test_params_that_do_not_fit_the_placeholders_are_named(query, params, message):
    from rms_duck.errors import ConfigError

    con = rms_duck.connect()
    with pytest.raises(ConfigError, match=message):
        rms_duck.pack(con, query, budget=300, params=params)
    assert con.execute("SELECT count(*) FROM rms_bundles").fetchall() == [(0,)]
    # A '?' inside a string literal is no placeholder; numbered ones stay DuckDB's to bind.
    assert rms_duck.pack(con, "SELECT * FROM rms_candidates('what?', ?)", budget=300,
                         params=[None], store=False).flags == ("NO_CANDIDATES",)
    assert rms_duck.pack(con, "SELECT * FROM rms_candidates($1, $2)", budget=300,
                         params=["heron", None], store=False).flags == ("NO_CANDIDATES",)

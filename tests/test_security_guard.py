"""Adversarial review M1, M2, L1, L7: settings, logs and catalogs are rejected, the guard is
linear in the query's size with a size limit, and ranking queries take timeout/max_rows."""

from __future__ import annotations

import hashlib

import duckdb
import pytest
from sqlglot import exp
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers

import rms_duck
from rms_duck.duck.query import MAX_QUERY_CHARS, _parse_one, check_query, fingerprint
from rms_duck.errors import ConfigError, QueryLimitError, QueryRejectedError


@pytest.mark.parametrize("sql", [
    "SELECT 'p' AS id, 0.5 AS score, current_setting('temp_directory') AS content",
    "SELECT name AS id, 0.5 AS score, CAST(setting AS VARCHAR) AS content FROM pg_settings",
    "SELECT name AS id, 0.5 AS score, 'x' AS content FROM pg_catalog.pg_settings",
    "SELECT 'l' AS id, 0.5 AS score, message AS content FROM duckdb_logs",
    "SELECT database_name AS id, 0.5 AS score, path AS content FROM duckdb_databases",
    "SELECT table_name AS id, 0.5 AS score, 'x' AS content FROM information_schema.tables",
    "SELECT 'q' AS id, 0.5 AS score, current_query() AS content",
    "SELECT 'a' AS id, 0.5 AS score, 'c' AS content, pg_sleep(3) AS z",
])
def test_settings_logs_and_catalogs_are_rejected(con, sql):
    with pytest.raises(QueryRejectedError, match="rejected"):
        rms_duck.pack(con, sql, budget=500, store=False)


def test_the_owners_logged_queries_do_not_leak(con):
    con.execute("CALL enable_logging()")
    con.execute("SELECT 'owner query with secret-token-123'").fetchall()
    with pytest.raises(QueryRejectedError, match="duckdb_logs"):
        rms_duck.pack(con, "SELECT 'l' AS id, 0.5 AS score, coalesce(message, '') AS content "
                           "FROM duckdb_logs", budget=8000, store=False)
    con.execute("CALL disable_logging()")


@pytest.mark.parametrize("inner", [
    "select current_setting(''temp_directory'') as s",
    "select * from read_csv(''/nonexistent/secret.csv'')",
])
def test_sql_inside_json_serialize_plan_is_rejected(con, inner):
    """json_serialize_plan binds the SQL in its string, where the guard cannot see: with
    optimize:=true it folded current_setting() into the plan, and its errors told which
    files exist."""
    con.execute("SET temp_directory = '/home/secret_user/tmp'")
    sql = ("SELECT 'p' AS id, 0.5 AS score, json_serialize_plan("
           f"'{inner}', optimize:=true) AS content")
    with pytest.raises(QueryRejectedError, match="json_serialize_plan"):
        rms_duck.pack(con, sql, budget=2000, store=False)


def _old_fingerprint(tree):
    shape = normalize_identifiers(tree.copy(), dialect="duckdb")
    shape = shape.transform(lambda n: exp.Placeholder() if isinstance(n, exp.Literal) else n)
    text = shape.sql(dialect="duckdb", comments=False, normalize=True)
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("sql", [
    "SELECT id, 0.5 AS score, content FROM rms_nodes WHERE salience > 0.3 LIMIT 10",
    "SELECT 'a' AS id, 0.5 AS score, 'x' AS content WHERE 1 IN (1, 2, 3)",
    "SELECT id, score, content FROM rms_candidates('deploy', 20, 0.5) WHERE x = 'y'",
    "SELECT CAST(id AS VARCHAR) AS id, 1 - 0.1 * rank AS score, content FROM t "
    "WHERE created_at > TIMESTAMP '2026-01-01' + INTERVAL '3' DAY",
])
def test_the_linear_fingerprint_equals_the_old_one(sql):
    tree = _parse_one(sql, "duckdb")
    assert fingerprint(tree) == _old_fingerprint(tree)


@pytest.mark.slow
def test_sixteen_thousand_literals_pass_the_guard():
    """Quadratic before (24 s here); no timing asserted, but a CI timeout would catch it."""
    sql = ("SELECT 'a' AS id, 0.5 AS score, 'x' AS content WHERE 1 IN ("
           + ",".join(map(str, range(16_000))) + ")")
    assert check_query(sql).fingerprint


def test_a_query_over_the_size_limit_is_rejected_clearly():
    sql = "SELECT 'a' AS id, 0.5 AS score, '" + "x" * MAX_QUERY_CHARS + "' AS content"
    with pytest.raises(QueryRejectedError, match=r"characters long, more than the 100,000"):
        check_query(sql)


def test_deep_nesting_is_a_rejection_not_a_recursion_error(con):
    sql = "SELECT 'a' AS id, 0.5 AS score, " + "(" * 500 + "'x'" + ")" * 500 + " AS content"
    with pytest.raises(QueryRejectedError, match="nested too deeply"):
        rms_duck.pack(con, sql, budget=300, store=False)


def test_max_rows_stops_a_huge_ranking_query(con):
    with pytest.raises(QueryLimitError, match=r"more than max_rows=1,000 rows"):
        rms_duck.pack(con, "SELECT 'x' || i AS id, 0.5 AS score, 'c ' || i AS content "
                           "FROM range(2000000) t(i)", budget=300, store=False, max_rows=1000)
    b = rms_duck.pack(con, "SELECT 'x' || i AS id, 0.5 AS score, 'c' AS content FROM range(10) "
                           "t(i)", budget=300, store=False, max_rows=10)
    assert len(b.included) + len(b.excluded) == 10


def test_timeout_interrupts_a_slow_ranking_query(con):
    with pytest.raises(QueryLimitError, match="timeout=0.2 s"):
        rms_duck.pack(con, "SELECT 'a' AS id, 0.5 AS score, CAST(sum(i) AS VARCHAR) AS content "
                           "FROM range(100000000000) t(i)", budget=300, store=False, timeout=0.2)


def test_a_timeout_while_rows_stream_is_a_query_limit_error(con):
    """Past its first batch, DuckDB's interrupt reaches Python through the Arrow reader as
    an OSError; it is still the timeout's QueryLimitError (the MCP server reports those)."""
    with pytest.raises(QueryLimitError, match="timeout=0.3 s"):
        rms_duck.pack(con, "SELECT 'n' || i AS id, 0.5::DOUBLE AS score, 'x' AS content "
                           "FROM range(1000000000) t(i)", budget=300, store=False, timeout=0.3)
    assert rms_duck.pack(con, "SELECT 'a' AS id, 0.5 AS score, 'c' AS content", budget=300,
                         store=False).included


@pytest.mark.parametrize(("failing", "kind"), [
    ("error('boom at 60000')", duckdb.InvalidInputException),
    ("CAST('a' || i AS INTEGER)::VARCHAR", duckdb.ConversionException),
])
def test_a_query_error_while_rows_stream_is_the_duckdb_error_it_would_be_at_once(
        con, failing, kind):
    """Past the first batch a query's own error reaches Python as Arrow's OSError; it is
    raised as the DuckDB exception the same error in the first batch is."""
    sql = (f"SELECT 'n' || i AS id, 0.5::DOUBLE AS score, CASE WHEN i = 60000 THEN "
           f"{failing} ELSE 'x' END AS content FROM range(100000) t(i)")
    with pytest.raises(kind, match="failed while its rows were read: "):
        rms_duck.pack(con, sql, budget=300, store=False)
    with pytest.raises(kind):
        rms_duck.pack(con, sql.replace("i = 60000", "i = 0"), budget=300, store=False)


@pytest.mark.parametrize("kwargs, message", [
    ({"timeout": 0}, "timeout must be a positive number"),
    ({"timeout": "5"}, "timeout must be a positive number"),
    ({"max_rows": 0}, "max_rows must be a positive whole number"),
    ({"max_rows": 1.5}, "max_rows must be a positive whole number"),
])
def test_bad_limits_are_config_errors(con, kwargs, message):
    with pytest.raises(ConfigError, match=message):
        rms_duck.pack(con, "SELECT 'a' AS id, 0.5 AS score, 'c' AS content", budget=300,
                      store=False, **kwargs)


@pytest.mark.parametrize("sql", ["SELECT * FROM notes", "SELECT * FROM main.notes",
                                 "SELECT * FROM my.db.notes"])
def test_a_name_duckdb_would_not_find_never_reaches_a_python_variable(con, sql):
    """A table only in an attached database passed the guard under names DuckDB does not
    resolve to it (bare, main.x; and my.db.notes for a database named "my.db"), and DuckDB
    then read the caller's DataFrame of that name instead (review of stop 24)."""
    import pandas as pd

    notes = pd.DataFrame({"id": ["PYVAR"], "score": [1.0], "content": ["from a variable"]})
    assert len(notes) == 1  # the replacement scan would find it in this frame
    con.execute("ATTACH ':memory:' AS d")
    con.execute("ATTACH ':memory:' AS \"my.db\"")
    for db in ("d", '"my.db"'):
        con.execute(f"CREATE TABLE {db}.main.notes AS SELECT 'REAL' AS id, 1.0 AS score, "
                    "'real row' AS content")
    con.execute("SET GLOBAL python_scan_all_frames = true")
    with pytest.raises(QueryRejectedError, match="is not a table, view or CTE"):
        rms_duck.pack(con, sql, budget=200, store=False)
    assert '"real row"' in rms_duck.pack(con, "SELECT * FROM d.notes", budget=200,
                                         store=False).context


def test_temp_names_and_use_resolve_as_duckdb_resolves_them(con):
    con.execute("CREATE TEMP TABLE picks AS SELECT 'n1' AS id")
    con.execute("CREATE TABLE notes AS SELECT 'n1' AS id, 0.5 AS score, 'home' AS content")
    con.execute("ATTACH ':memory:' AS d")
    con.execute("CREATE TABLE d.main.notes AS SELECT 'n1' AS id, 0.5 AS score, "
                "'attached' AS content")
    sql = "SELECT n.* FROM notes n JOIN {} p USING (id)"
    assert '"home"' in rms_duck.pack(con, sql.format("temp.picks"), budget=200,
                                     store=False).context
    # On the connection itself (it reads a TEMP table), after USE d: notes is d's.
    con.execute("USE d")
    assert '"attached"' in rms_duck.pack(con, sql.format("picks"), budget=200,
                                         store=False).context


LEAKS_THROUGH_A_CTE_ELSEWHERE = [
    "SELECT * FROM (WITH secret AS (SELECT 1 AS a) SELECT * FROM secret) t, secret",
    "SELECT *, (WITH secret AS (SELECT 1 AS v) SELECT v FROM secret) FROM secret",
    "(WITH secret AS (SELECT 1) SELECT * FROM notes) UNION ALL BY NAME (SELECT * FROM secret)",
    # DuckDB reads no CTE before its definition: this `secret` is the catalog's, or a scan.
    "WITH a AS (SELECT * FROM secret), secret AS (SELECT * FROM notes) SELECT * FROM a",
    # A RECURSIVE CTE's own name is bound only in its recursive term, the right side of
    # the UNION that is its body (third review of stop 24).
    "WITH RECURSIVE secret AS (SELECT * FROM secret) SELECT * FROM secret",
    "WITH RECURSIVE secret AS MATERIALIZED (SELECT * FROM secret) SELECT * FROM secret",
    "WITH RECURSIVE x AS (SELECT * FROM notes), secret AS (SELECT * FROM secret) "
    "SELECT * FROM secret",
    "WITH RECURSIVE secret AS (SELECT id, score, content FROM secret UNION ALL BY NAME "
    "SELECT * FROM notes) SELECT * FROM secret",
    "WITH RECURSIVE secret AS (SELECT * FROM notes UNION ALL SELECT * FROM secret UNION ALL "
    "SELECT * FROM notes WHERE false) SELECT * FROM secret",
    "WITH RECURSIVE secret AS (SELECT * FROM secret EXCEPT SELECT * FROM notes) "
    "SELECT * FROM secret",
    "SELECT * FROM notes WHERE 'S1' IN (WITH RECURSIVE secret AS (FROM secret) "
    "SELECT id FROM secret)",
    # DuckDB never makes a UNION BY NAME body recursive (fourth review of stop 24).
    "WITH RECURSIVE secret AS (SELECT * FROM notes UNION ALL BY NAME SELECT id, score / 2 "
    "AS score, content FROM secret WHERE score > 0.2) SELECT * FROM secret",
    "WITH RECURSIVE secret AS (SELECT * FROM notes UNION BY NAME SELECT id, score / 2 "
    "AS score, content FROM secret WHERE score > 0.2) SELECT * FROM secret",
    "WITH RECURSIVE secret AS ((SELECT * FROM notes) UNION ALL BY NAME (SELECT id, score / 2 "
    "AS score, content FROM secret WHERE score > 0.2)) SELECT * FROM secret",
]


@pytest.fixture(scope="module")
def scanning():
    """One connection for the scope tests: a notes table, and the replacement scan allowed
    to look through every frame, as a leak would need."""
    connection = rms_duck.connect()
    connection.execute("SET GLOBAL python_scan_all_frames = true")
    connection.execute("CREATE TABLE notes AS SELECT 'n1' AS id, 0.5 AS score, 'ok' AS content")
    yield connection
    connection.close()


@pytest.mark.parametrize("dialect", ["duckdb", "postgres"])
@pytest.mark.parametrize("sql", LEAKS_THROUGH_A_CTE_ELSEWHERE)
def test_a_cte_name_counts_only_where_duckdb_scopes_it(scanning, sql, dialect):
    """The guard took any name that some CTE in the query had, even out of that CTE's
    scope, where DuckDB resolved it through the replacement scan and read the caller's
    DataFrame `secret` (review of stop 24; it predates that stop)."""
    import pandas as pd

    secret = pd.DataFrame({"id": ["S1"], "score": [1.0], "content": ["LEAKED-SECRET"]})
    assert len(secret) == 1  # the replacement scan would find it in this frame
    if dialect != "duckdb" and ("(FROM" in sql or "MATERIALIZED" in sql):
        pytest.skip("DuckDB-only syntax")
    with pytest.raises(QueryRejectedError, match="'secret' in .* is not a table, view or CTE"):
        rms_duck.pack(scanning, sql, budget=300, store=False, dialect=dialect)


@pytest.mark.parametrize("sql", [
    "WITH b AS (SELECT * FROM notes), a AS (SELECT * FROM b) SELECT * FROM a",
    "WITH RECURSIVE r AS (SELECT id, score, content FROM notes UNION ALL "
    "SELECT id, score, content FROM r WHERE false) SELECT * FROM r",
    "WITH x AS (SELECT * FROM notes) SELECT * FROM (SELECT * FROM x) s",
    "WITH x AS (SELECT * FROM notes) SELECT * FROM x UNION ALL SELECT * FROM x",
    "SELECT * FROM notes WHERE id IN (WITH y AS (SELECT 'n1' AS id) SELECT id FROM y)",
    "WITH RECURSIVE r AS (SELECT id, score, content FROM notes UNION ALL "
    "(SELECT id, score, content FROM r WHERE false UNION ALL SELECT id, score, content "
    "FROM r WHERE false)) SELECT * FROM r",
    "WITH RECURSIVE r AS ((SELECT id, score, content FROM notes) UNION ALL "
    "(SELECT id, score, content FROM r WHERE false)) SELECT * FROM r",
])
def test_ctes_in_scope_still_pass(scanning, sql):
    assert '"ok"' in rms_duck.pack(scanning, sql, budget=300, store=False).context
    assert "notes" in check_query(sql).tables


def test_after_use_a_query_on_temp_tables_may_name_the_used_databases_tables(con):
    """It was checked against the default database first and rejected (review of stop 24)."""
    con.execute("ATTACH ':memory:' AS o")
    con.execute("CREATE TABLE o.onlyo AS SELECT 'n1' AS id, 0.5 AS score, 'in o' AS content")
    con.execute("CREATE TEMP TABLE picks AS SELECT 'n1' AS id")
    con.execute("USE o")
    assert '"in o"' in rms_duck.pack(con, "SELECT onlyo.* FROM onlyo JOIN picks USING (id)",
                                     budget=300, store=False).context


@pytest.mark.parametrize("cte, read", [("\u00c4b", "\u00e4b"), ("\"\u212ab\"", "kb")])
def test_names_fold_in_ascii_only_as_duckdb_folds_them(scanning, cte, read):
    """Python's lower() maps a Kelvin sign to k and \u00c4 to \u00e4; DuckDB does not, so
    such a name passed the guard as a CTE, table or TEMP table and DuckDB read the caller's
    DataFrame of the folded name (third review of stop 24)."""
    import pandas as pd

    äb = kb = pd.DataFrame({"id": ["S1"], "score": [1.0], "content": ["LEAKED"]})
    assert len(äb) == len(kb) == 1  # what the replacement scan would read
    with pytest.raises(QueryRejectedError, match="is not a table, view or CTE"):
        rms_duck.pack(scanning, f"WITH {cte} AS (SELECT * FROM notes) SELECT * FROM {read}",
                      budget=300, store=False)
    for kind in ("TABLE", "TEMP TABLE"):
        scanning.execute(f"CREATE OR REPLACE {kind} {cte} AS SELECT * FROM notes")
        with pytest.raises(QueryRejectedError, match="is not a table, view or CTE"):
            rms_duck.pack(scanning, f"SELECT * FROM {read}", budget=300, store=False)
        scanning.execute(f"DROP {kind.split()[-1]} {cte}")


@pytest.mark.parametrize("store", [False, True])
def test_a_ranking_query_cannot_store_through_rms_store(con, store):
    # rms_store commits through a cursor of its own, outside the query's READ ONLY
    # transaction: a ranking query calling it sealed a receipt of its choosing.
    sql = ("SELECT 'a' AS id, 0.5 AS score, rms_store([{'id': 'x', 'score': 1.0, "
           "'content': 'forged'}], 300, namespace := 'audit') AS content")
    with pytest.raises(QueryRejectedError, match="the function rms_store"):
        rms_duck.pack(con, sql, budget=500, store=store)
    assert con.sql("SELECT count(*) FROM rms_bundles").fetchall() == [(0,)]
    assert con.sql("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]


def _installed(extension: str) -> bool:
    con = duckdb.connect()
    try:
        return bool(con.execute("SELECT installed FROM duckdb_extensions() "
                                "WHERE extension_name = ?", [extension]).fetchone()[0])
    finally:
        con.close()


@pytest.mark.skipif(_installed("inet"), reason="inet is installed here, so it would just load")
def test_a_ranking_query_cannot_make_duckdb_download_an_extension(con):
    """Naming a type or function of a known extension (INET, stem) made DuckDB fetch it from
    extensions.duckdb.org over HTTP and load it, past the guard; rms_duck downloads nothing."""
    assert con.execute("SELECT current_setting('autoinstall_known_extensions')").fetchone() == (
        False,)
    plain = duckdb.connect()
    try:
        rms_duck.register(plain)
        assert plain.execute(
            "SELECT current_setting('autoinstall_known_extensions')").fetchone() == (False,)
    finally:
        plain.close()
    sql = ("SELECT 'a' AS id, 0.5 AS score, "
           "CAST(CAST('127.0.0.1' AS INET) AS VARCHAR) AS content")
    with pytest.raises(duckdb.Error, match="Install it first") as info:
        rms_duck.pack(con, sql, budget=500, store=False)
    assert "download" not in str(info.value).lower()


@pytest.mark.skipif(_installed("motherduck"), reason="motherduck is installed here")
def test_a_remote_database_path_does_not_download_its_extension():
    with pytest.raises(rms_duck.errors.DatabaseOpenError, match="not found") as info:
        rms_duck.connect("md:rev_no_such_db")
    assert "download" not in str(info.value).lower()


PLANTED = ("CREATE OR REPLACE MACRO rms_candidates(question, ns := NULL, k := 50) AS TABLE "
           "SELECT 'leak' AS id, 0.5 AS score, content FROM read_text(?)")


@pytest.mark.parametrize("sql", [
    "SELECT * FROM \"rms_candidates\"('q')",
    "SELECT * FROM \"RMS_CANDIDATES\"('q')",
])
def test_a_quoted_macro_name_still_runs_the_shipped_copy(tmp_path, sql):
    """The query ran on the shipped TEMP macros only when the regenerated SQL matched
    `rms_x(`: quoted ("RMS_CANDIDATES"( after sqlglot) it ran the file's stored macro, which a
    writer had made read a file and a read-only connection cannot restore."""
    secret = tmp_path / "secret.txt"
    secret.write_text("SECRETPW=hunter2\n", encoding="utf-8")
    path = str(tmp_path / "planted.duckdb")
    rms_duck.connect(path).close()
    writer = duckdb.connect(path)
    writer.execute(PLANTED.replace("?", "'" + str(secret).replace("'", "''") + "'"))
    writer.close()
    with pytest.warns(rms_duck.errors.RmsWarning):
        con = rms_duck.connect(path, read_only=True)
    try:
        bundle = rms_duck.pack(con, sql, budget=500, store=False)
        assert "hunter2" not in bundle.context and bundle.included == ()
    finally:
        con.close()


@pytest.mark.parametrize("sql", [
    "SELECT * FROM memory.rms_candidates('q')",
    "SELECT * FROM memory.main.rms_candidates('q')",
    "SELECT * FROM \"memory\".\"main\".\"rms_candidates\"('q')",
    "SELECT 'a' AS id, 0.5 AS score, memory.main.rms_token_count('x') AS content",
])
def test_a_qualified_rms_macro_call_is_rejected(con, sql):
    """A database-qualified name reaches the copy stored in the file, not the shipped TEMP
    one the guard trusts."""
    with pytest.raises(QueryRejectedError, match="qualified call .* reaches the copy stored"):
        rms_duck.pack(con, sql, budget=500, store=False)


def test_a_qualified_table_function_in_lateral_is_held_to_the_allow_list(con):
    sql = ("SELECT 'a' AS id, 0.5 AS score, 'x' AS content FROM range(1) t, "
           "LATERAL system.main.test_all_types() s")
    with pytest.raises(QueryRejectedError, match="the table function test_all_types"):
        rms_duck.pack(con, sql, budget=500, store=False)


def test_a_quoted_ranking_macro_refreshes_the_index_as_an_unquoted_one_does(con):
    """sqlglot writes a quoted name as "RMS_CANDIDATES"(: the check for macros that read the
    lexical index missed it, so the pack failed on an out-of-date index."""
    con.execute("INSERT INTO rms_nodes (id, content) VALUES "
                "('00000000-0000-0000-0000-000000000001', 'The Heron cut-over moved.')")
    bundle = rms_duck.pack(con, "SELECT * FROM \"rms_candidates\"('heron cut-over')",
                           budget=500, store=False)
    assert [c.id for c in bundle.included] == ["00000000-0000-0000-0000-000000000001"]

"""SQL-only storing: rms_store() packs and stores with a chained receipt, from plain SQL.

The ecosystem review's dbt caveat ("receipts are stored only by Python rms_duck.pack(), so
dbt gets bundles but no hash chain") as a regression test, on a registered connection.
"""

from __future__ import annotations

import duckdb
import pytest

import rms_duck

GROUPS = """
    SELECT * FROM (VALUES
        ('heron', 'h1', 0.9, 'The Heron cut-over moved to 2026-12-19.'),
        ('heron', 'h2', 0.6, 'Rollback keeps the old cluster read-only.'),
        ('billing', 'b1', 0.8, 'Billing exports run nightly at 02:00 UTC.')
    ) AS t(q, id, score, content)
"""


def test_rms_store_from_sql_stores_verifiable_replayable_bundles(con):
    stored = con.execute(f"""
        SELECT q, rms_store(list({{'id': id, 'score': score, 'content': content}}), 300,
                            config := {{'context_format': 'compact'}},
                            namespace := 'sql-job', session_id := 'nightly') AS receipt_id
        FROM ({GROUPS}) GROUP BY q ORDER BY q""").fetchall()
    assert [q for q, _ in stored] == ["billing", "heron"]
    rows = con.execute("""
        SELECT r.chain_namespace, r.seq, b.session_id, b.context_format, b.included_count
        FROM rms_receipts AS r JOIN rms_bundles AS b USING (bundle_id) ORDER BY r.seq""").fetchall()
    # One chain, seq 1 and 2 (which group stores first is DuckDB's choice, not the ORDER BY's).
    assert [row[:4] for row in rows] == [("sql-job", 1, "nightly", "compact"),
                                         ("sql-job", 2, "nightly", "compact")]
    assert sorted(row[4] for row in rows) == [1, 2]
    assert con.execute("SELECT * FROM rms_verify_receipts()").fetchall() == []
    assert rms_duck.verify_receipts(con) == []
    for _, receipt_id in stored:
        assert rms_duck.replay(con, receipt_id).identical


@pytest.mark.slow
def test_rms_store_appends_a_calls_bundles_in_one_transaction_not_one_by_one(con, monkeypatch):
    """A transaction per bundle cost about 10 ms each, 26 times the pack (2,000 groups of 8:
    21 s). rms_store now appends each call's bundles together, in one transaction (whether
    it packed them here or across processes), with a gap-free chain in the order it packed
    them."""
    from rms_duck.duck import storage

    transactions = []
    real = storage._Append.commit

    def commit(self):
        stored = real(self)
        transactions.append(len(stored))
        return stored

    monkeypatch.setattr(storage._Append, "commit", commit)
    con.execute("CREATE TEMP TABLE many AS SELECT i // 2 AS q, 'n' || i AS id, "
                "(i % 7) / 7.0 AS score, 'note ' || i || ' on the rollout' AS content "
                "FROM range(2400) t(i)")
    stored = con.execute(
        "SELECT q, rms_store(list({'id': id, 'score': score, 'content': content}), 200, "
        "namespace := 'bulk', session_id := 'job-1') FROM many GROUP BY q").fetchall()
    assert len({receipt_id for _, receipt_id in stored}) == 1200
    assert sum(transactions) == 1200
    assert len(transactions) <= 2  # one DuckDB call of 1,200 groups, or two
    assert con.execute("SELECT list(seq ORDER BY seq), count(DISTINCT b.session_id), "
                       "min(b.session_id) FROM rms_receipts JOIN rms_bundles b USING "
                       "(bundle_id) WHERE chain_namespace = 'bulk'").fetchall() == [
        (list(range(1, 1201)), 1, "job-1")]
    # Stamped a microsecond apart in chain order: time order is chain order (the session
    # metrics view orders a session's bundles by time; a tie left it to random ids).
    assert con.execute("SELECT list(seq ORDER BY created_at), count(DISTINCT created_at) "
                       "FROM rms_receipts WHERE chain_namespace = 'bulk'").fetchall() == [
        (list(range(1, 1201)), 1200)]
    packed = dict(con.execute(
        "SELECT q, pack_context(list({'id': id, 'score': score, 'content': content}), 200)"
        ".context_sha256 FROM many GROUP BY q").fetchall())
    digests = dict(con.execute(
        "SELECT receipt_id::VARCHAR, context_sha256 FROM rms_receipts").fetchall())
    assert all(digests[receipt_id] == packed[q] for q, receipt_id in stored)
    assert rms_duck.verify_receipts(con) == []
    for _, receipt_id in (stored[0], stored[-1]):
        assert rms_duck.replay(con, receipt_id).identical


def test_rms_store_gives_the_bundle_pack_context_gives(con):
    packed = con.execute(f"""
        SELECT q, pack_context(list({{'id': id, 'score': score, 'content': content}}), 300)
                  .context_sha256
        FROM ({GROUPS}) GROUP BY q ORDER BY q""").fetchall()
    stored = con.execute(f"""
        SELECT q, rms_store(list({{'id': id, 'score': score, 'content': content}}), 300)
        FROM ({GROUPS}) GROUP BY q ORDER BY q""").fetchall()
    for (q, sha), (_, receipt_id) in zip(packed, stored, strict=True):
        assert con.execute("SELECT context_sha256 FROM rms_receipts WHERE receipt_id = ?",
                           [receipt_id]).fetchall() == [(sha,)], q


def test_rms_store_rejects_bad_candidates_and_stores_nothing(con):
    with pytest.raises(duckdb.Error, match="CandidateError: .*score"):
        con.execute("SELECT rms_store([{'id': 'a', 'score': 7, 'content': 'x'}], 300)").fetchall()
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]


@pytest.mark.slow
def test_rms_store_on_a_read_only_file_says_what_to_do(tmp_path):
    path = str(tmp_path / "ro.duckdb")
    rms_duck.connect(path).close()
    ro = rms_duck.connect(path, read_only=True)
    try:
        with pytest.raises(duckdb.Error, match="open the database writable, or use "
                                               r"pack_context\(\)"):
            ro.execute("SELECT rms_store([{'id': 'a', 'score': 0.5, 'content': 'x'}], 300)"
                       ).fetchall()
    finally:
        ro.close()


BAD_GROUP = """
    SELECT i // 10 AS g, 'id' || i AS id, CASE WHEN i = {bad} THEN 1.5 ELSE 0.5 END AS score,
           'memory text ' || i AS content
    FROM range(1000) AS r(i)
"""


@pytest.mark.parametrize("bad", [5, 305, 995])
def test_one_bad_group_in_a_group_by_stores_nothing_and_is_named(con, bad):
    """SQL-surface review: group 30 of 100 holding a score of 1.5 failed the statement after
    30 bundles (which ones depended on evaluation order) were stored. Now a batch of groups
    is packed whole before any of it is stored."""
    first = bad - bad % 10
    # One thread: DuckDB hands the UDF all 100 groups in one batch (several threads would run
    # several batches at once, each stored or refused on its own).
    con.execute("SET threads = 1")
    with pytest.raises(duckdb.Error) as info:
        con.execute(f"""
            SELECT g, rms_store(list({{'id': id, 'score': score, 'content': content}}), 300,
                                namespace := 'grp')
            FROM ({BAD_GROUP.format(bad=bad)}) GROUP BY g""").fetchall()
    message = str(info.value)
    assert f"candidate #{bad % 10} (id 'id{bad}'): field 'score'" in message
    assert f"(in the candidate list whose smallest id is 'id{first}')" in message
    assert con.execute("SELECT count(*) FROM rms_bundles").fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]


def test_a_batch_of_groups_that_fails_to_store_stores_none_of_them(con, monkeypatch):
    """A batch of groups (up to 2,048) is stored in one transaction: when its last insert
    fails (here: the disk is full when its receipts go in), none of its bundles stay. With
    a transaction per 1,000 bundles, the first 1,000 of these 1,500 stayed stored."""
    from rms_duck.duck import storage

    real = storage._insert

    def full_disk(cur, table, columns, rows):
        if table == "rms_receipts" and len(rows) > 1_000:
            raise duckdb.IOException("IO Error: Could not write file: No space left on device")
        return real(cur, table, columns, rows)

    monkeypatch.setattr(storage, "_insert", full_disk)
    con.execute("SET threads = 1")  # one batch of 1,500 groups
    with pytest.raises(duckdb.Error, match="could not write .*free disk space"):
        con.execute("""
            SELECT g, rms_store(list({'id': 'n' || g, 'score': 0.5, 'content': 'note ' || g}),
                                100)
            FROM range(1500) t(g) GROUP BY g""").fetchall()
    assert con.execute("SELECT count(*) FROM rms_bundles").fetchall() == [(0,)]
    assert con.execute("SELECT count(*) FROM rms_chain_heads").fetchall() == [(0,)]


@pytest.mark.parametrize("expression, expected", [
    ("pack_context(list({'id': id, 'score': score, 'content': content}), "
     "CASE WHEN g = 43 THEN NULL ELSE 300 END)",
     "budget must be a whole number of tokens, got None (SQL NULL)"),
    ("pack_context(list({'id': CASE WHEN id = 'id437' THEN NULL ELSE id END, "
     "'score': score, 'content': content}), 300)",
     "candidate #7: field 'id' is required"),
])
def test_an_error_in_one_group_of_pack_context_names_the_group(con, expression, expected):
    with pytest.raises(duckdb.Error) as info:
        con.execute(f"SELECT g, {expression} FROM ({BAD_GROUP.format(bad=-1)}) "
                    "GROUP BY g").fetchall()
    assert expected in str(info.value)
    assert "(in the candidate list whose smallest id is 'id430')" in str(info.value)


ONE = "[{'id': 'a', 'score': 0.5, 'content': 'The deploy moved to Friday.'}]"


@pytest.mark.parametrize("fn", ["pack_context", "rms_store"])
@pytest.mark.parametrize("budget, expected", [
    ("'400.5'", "got 400.5"), ("400.5", "got 400.5"), ("true", "got true"),
    ("'abc'", "got abc"), ("'nan'::DOUBLE", "got nan")])
def test_a_budget_that_is_not_a_whole_number_is_refused_by_name(con, fn, budget, expected):
    """SQL-surface review: '400.5' was rounded to 401, and a DOUBLE budget was a binder error
    naming the internal UDF."""
    with pytest.raises(duckdb.Error) as info:
        con.execute(f"SELECT {fn}({ONE}, {budget})").fetchall()
    assert f"{fn}: budget must be a whole number of tokens, {expected}" in str(info.value)
    assert con.execute("SELECT count(*) FROM rms_receipts").fetchall() == [(0,)]


@pytest.mark.parametrize("budget", ["400", "400.0", "'400'", "'4e2'", "400::HUGEINT",
                                    "400::DECIMAL(10, 2)"])
def test_a_whole_budget_of_any_type_packs_as_the_integer(con, budget):
    assert con.execute(f"SELECT pack_context({ONE}, {budget}).context_budget").fetchall() == [
        (400,)]


@pytest.mark.parametrize("fn", ["pack_context", "rms_store"])
@pytest.mark.parametrize("budget", ["1e30", "2147483648", "-2147483649"])
def test_a_budget_outside_32_bits_is_refused_with_the_range(con, fn, budget):
    with pytest.raises(duckdb.Error) as info:
        con.execute(f"SELECT {fn}({ONE}, {budget})").fetchall()
    assert (f"{fn}: budget must be in -2,147,483,648..2,147,483,647 tokens"
            in str(info.value))
    assert con.execute(f"SELECT pack_context({ONE}, -2147483648).flags").fetchall() == [
        (["BUDGET_ERROR"],)]


def test_a_lagging_chain_head_is_recovered_by_a_store_of_many_bundles(con):
    """A head row that names an older receipt makes the append collide on (chain, seq); the
    retry scans the chain. With two or more bundles the collision was masked by the Arrow
    insert's clean-up failing on the aborted transaction, and nothing retried (second
    review of stop 24)."""
    import pyarrow as pa

    def lag():
        con.execute("UPDATE rms_chain_heads SET seq = 1, receipt_sha256 = (SELECT "
                    "receipt_sha256 FROM rms_receipts WHERE chain_namespace = 'ns' AND seq = 1) "
                    "WHERE chain_namespace = 'ns'")

    con.execute("CREATE TEMP TABLE t AS SELECT i AS g, 'n' || i AS id, 0.5 AS score, "
                "'note ' || i AS content FROM range(3) t(i)")
    store = ("SELECT g, rms_store(list({'id': id, 'score': score, 'content': content}), 300, "
             "namespace := 'ns') FROM t GROUP BY g")
    con.execute(store).fetchall()
    lag()
    con.execute(store).fetchall()
    lag()
    packed = rms_duck.pack_batches(pa.table({"g": [1, 1, 2], "id": ["a", "b", "c"],
                                             "score": [0.5] * 3, "content": ["x", "y", "z"]}),
                                   by="g", budget=200, inputs=True)
    rms_duck.store_batches(con, packed, by="g", namespace="ns")
    assert con.execute("SELECT list(seq ORDER BY seq) FROM rms_receipts").fetchall() == [
        (list(range(1, 9)),)]
    assert con.execute("SELECT seq FROM rms_chain_heads WHERE chain_namespace = 'ns'"
                       ).fetchall() == [(8,)]
    assert rms_duck.verify_receipts(con) == []


_BARE = ("rms_candidates_arg([{'id': 'a', 'score': 0.5, 'content': 'x'}], 'rms_store'), 300, "
         "NULL::VARCHAR, NULL::VARCHAR, NULL::VARCHAR")


def test_the_store_udf_called_without_its_macro_says_so(con):
    """rms_store_udf stores through the connection its rms_store macro names; called bare,
    it has none and says what to call instead."""
    with pytest.raises(duckdb.Error, match=r"rms_store has no connection to store through"):
        con.execute(f"SELECT rms_store_udf({_BARE}, NULL)").fetchall()
    with pytest.raises(duckdb.Error, match=r"rms_store has no connection to store through"):
        con.execute(f"SELECT rms_store_udf({_BARE}, 0)").fetchall()


# DuckDB keeps a Python UDF in the database's system catalog, but its callable only as long as
# the Python connection that registered it: a UDF bound to that connection (a closure) was
# freed with it, and the next rms_store on another connection of the database crashed the
# process (a segmentation fault). Each case runs in a process of its own for that reason.
_OUTLIVED = """
import gc, sys, duckdb, rms_duck
path, case = sys.argv[1], sys.argv[2]
first = rms_duck.connect(path)
if case == "second connect":
    other = rms_duck.connect(path)
elif case == "cursor":
    other = rms_duck.register(first.cursor())
else:
    other = rms_duck.register(duckdb.connect(path))
del first
gc.collect()
print(other.execute("SELECT rms_store([{'id': 'a', 'score': 0.5, 'content': 'x'}], 300)"
                    ).fetchall()[0][0])
print(rms_duck.verify_receipts(other))
"""


@pytest.mark.parametrize("case", ["second connect", "cursor", "plain duckdb connection"])
def test_rms_store_works_after_the_connection_that_registered_it_is_gone(tmp_path, case):
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _OUTLIVED, str(tmp_path / "m.duckdb"), case],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    receipt_id, problems = done.stdout.splitlines()
    assert len(receipt_id) == 36 and problems == "[]"


def test_rms_store_stores_only_where_its_result_is_read(con):
    """docs/integrations.md: DuckDB drops a column nothing reads before the query runs, so a
    count(*) over rms_store stores nothing, while a view over it stores on every read of
    receipt_id. Found by an analyst counting the bundles a job stored (it stored none)."""
    def stored() -> int:
        return con.execute("SELECT count(*) FROM rms_receipts").fetchall()[0][0]

    per_group = (f"SELECT q, rms_store(list({{'id': id, 'score': score, 'content': content}}),"
                 f" 300) AS receipt_id FROM ({GROUPS}) GROUP BY q")
    assert con.execute(f"SELECT count(*) FROM ({per_group})").fetchall() == [(2,)]
    assert stored() == 0
    assert con.execute(f"SELECT count(receipt_id) FROM ({per_group})").fetchall() == [(2,)]
    assert stored() == 2
    con.execute(f"CREATE TEMP VIEW stored_per_group AS {per_group}")
    con.execute("SELECT q FROM stored_per_group").fetchall()
    assert stored() == 2
    con.execute("SELECT receipt_id FROM stored_per_group").fetchall()
    con.execute("SELECT receipt_id FROM stored_per_group").fetchall()
    assert stored() == 6
    assert con.execute("SELECT * FROM rms_verify_receipts()").fetchall() == []


def test_a_failing_group_is_named_the_same_whatever_the_order_of_its_list(con):
    """The group was named by its first candidate, and list() keeps the order DuckDB's
    threads produced: one query over a million rows named 'id1' on one run and 'id122881'
    on the next. It is named by its smallest id now."""
    rows = ["{'id': 'b7', 'score': 0.5, 'content': 'x'}", "{'id': 'a3', 'score': 1.5, "
            "'content': 'y'}", "{'id': 'c9', 'score': 0.5, 'content': 'z'}"]
    messages = set()
    for order in (rows, rows[::-1], rows[1:] + rows[:1]):
        with pytest.raises(duckdb.Error) as info:
            con.execute(f"SELECT pack_context([{', '.join(order)}], 300)").fetchall()
        messages.add(str(info.value).split("field 'score'")[1])
    assert messages == {" must be a number in [0, 1], got 1.5; normalise scores into [0, 1] "
                        "(for example divide by the maximum) (in the candidate list whose "
                        "smallest id is 'a3')"}


def test_sql_on_one_connection_cannot_store_through_another(tmp_path):
    """rms_store's UDF named its connection by a counted number: SQL on a locked-down
    connection (external access off) called rms_store_udf(..., 1) and stored a bundle in
    another database file this process had open."""
    victim = rms_duck.connect(str(tmp_path / "victim.duckdb"))
    attacker = rms_duck.connect()
    try:
        attacker.execute("SET enable_external_access = false")
        (own,) = attacker.execute(
            "SELECT macro_definition FROM duckdb_functions() WHERE function_name = 'rms_store' "
            "AND database_name = 'temp'").fetchone()
        own_number = int(own.rsplit(", ", 1)[1].rstrip(")"))
        stored = 0
        for number in range(1, 200):
            if number == own_number:
                continue  # the attacker's own connection
            try:
                attacker.execute(
                    "SELECT rms_store_udf([{'id': 'x', 'score': 0.5, 'content': 'planted'}]"
                    f"::rms_candidate[], 400, NULL, 'victim-ns', NULL, {number})").fetchall()
                stored += 1
            except duckdb.Error as exc:
                assert "rms_store has no connection to store through" in str(exc)
        assert stored == 0
        assert victim.execute("SELECT count(*) FROM rms_receipts").fetchone() == (0,)
    finally:
        attacker.close()
        victim.close()


# integrations.md: lowering `threads` beside a running rms_store can hang (DuckDB joins its
# worker threads as that statement ends, one of them inside rms_store's own write); setting
# it to the value it has must not. In a process of its own, so a hang fails the test. The
# same loop lowering the value (SET threads = 2, then 3) hung by its 45th round in each of 4
# runs here, so 50 rounds would show it.
_SAME_THREADS = """
import threading, rms_duck
con = rms_duck.connect()
con.execute("SET threads = 3")
store, setter = rms_duck.register(con.cursor()), con.cursor()
done = threading.Event()
def keep_setting():
    while not done.is_set():
        setter.execute("SET threads = 3")
thread = threading.Thread(target=keep_setting)
thread.start()
stored = 0
try:
    for round in range(50):
        stored += len(store.execute(
            "SELECT g, rms_store(list({'id': 'id' || i, 'score': 0.5, "
            "'content': 'note ' || i || ' on room ' || (i % 7)}), 200) AS r "
            "FROM (SELECT i % 700 AS g, i FROM range(4200) t(i)) GROUP BY g").fetchall())
finally:
    done.set()
    thread.join()
print(stored, rms_duck.verify_receipts(con))
"""


@pytest.mark.slow
def test_setting_threads_to_the_value_it_has_beside_rms_store_is_safe():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-c", _SAME_THREADS], capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, (done.returncode, done.stderr[-2000:])
    assert done.stdout.split() == [str(50 * 700), "[]"]

"""The Python API over a DuckDB connection: rank with a query (or pass Arrow), pack, store."""

from __future__ import annotations

import re
import threading
import warnings
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import duckdb

from ..bundle import MemoryBundle
from ..candidates import CheckedCandidates, to_candidates
from ..columnar import Row, intake
from ..config import PackingConfig, check_flag, parse_config
from ..errors import ConfigError, QueryLimitError, QueryRejectedError, ReceiptError, RmsWarning
from .arrowin import arrow_table, check_arrow_kind
from .cursors import check_connection, cursor, explains_setup, macro_cursor
from .indexcheck import ensure_index, index_went_stale, reads_lexical_index
from .linecosts import pack_checked, persist_counter, repair_line_costs
from .query import ASCII_LOWER, check_query
from .storage import store_bundle
from .surrogates import first_surrogate
from .transactions import transaction_open


@explains_setup("rms_duck.pack")
def pack(con: duckdb.DuckDBPyConnection, candidates: str | Any, *,
         budget: int, config: PackingConfig | Mapping[str, Any] | str | None = None,
         store: bool = True, dialect: str = "duckdb",
         params: Sequence[Any] | Mapping[str, Any] | None = None,
         namespace: str | None = None, session_id: str | None = None,
         timeout: float | None = None, max_rows: int | None = None) -> MemoryBundle:
    """Rank (or take) candidates, pack them into `budget` tokens, and store the result.

    Args:
        con: a connection prepared by rms_duck.connect() or rms_duck.register().
        candidates: a read-only SELECT in `dialect` returning candidate rows (it may read
            the connection's TEMP tables, views and registered DataFrames), or any
            Arrow-capable table: pyarrow, pandas, polars, a DuckDB relation, or anything
            with __arrow_c_stream__.
        budget: the context budget in tokens, overhead included.
        config: PackingConfig fields (object, dict or JSON text).
        store: write the bundle and its receipt in one transaction (False skips storing).
        params: values for the query's ? placeholders (a list), or for its $name ones (a
            dict).
        namespace: the receipt chain to extend (default: the candidates' shared namespace).
        timeout: seconds the ranking query may run before it is interrupted (None: no limit).
        max_rows: most candidate rows the ranking query may return (None: no limit).

    Returns:
        The MemoryBundle; when stored, its receipt_id is set.

    Raises:
        QueryRejectedError, CandidateError, ConfigError: nothing is stored.
        ReceiptError: store=True on a read-only database (pass store=False).
        QueryLimitError (a QueryRejectedError): the query ran past timeout or max_rows.
        duckdb.Error: DuckDB could not bind or run the query (its own message says why).
    """
    check_connection(con, "rms_duck.pack")
    check_flag("store", store, "pass store=False to pack without storing")
    config = parse_config(config)
    _check_limits(timeout, max_rows)
    if not isinstance(candidates, str):
        # Before the query-only options below: a list of rows beside max_rows was told
        # only that max_rows would be ignored, and then, once it was left out, that rows
        # are passed another way.
        check_arrow_kind(candidates)
    if params is not None and not isinstance(candidates, str):
        # Before _query_params reads the values: its lone-surrogate and depth scan told a
        # table's caller to fix a value that would never be bound.
        raise ConfigError(
            "params fill a ranking query's placeholders, but candidates is a "
            f"{type(candidates).__name__}, not a query, so they would be ignored; leave "
            "params out, or pass the ranking query text as candidates")
    values = _query_params(params)
    if not isinstance(candidates, str):
        # max_rows=1 beside a table of 3 rows packed all 3: these limit a query only.
        for name, value, default in (("max_rows", max_rows, None), ("timeout", timeout, None),
                                     ("dialect", dialect, "duckdb")):
            if value != default:
                raise ConfigError(
                    f"{name} applies to a ranking query, but candidates is a "
                    f"{type(candidates).__name__}, not a query, so {name}={value!r} would be "
                    f"ignored; leave {name} out (to pack fewer rows, slice the table first)"
                    if name == "max_rows" else
                    f"{name} applies to a ranking query, but candidates is a "
                    f"{type(candidates).__name__}, not a query, so {name}={value!r} would be "
                    f"ignored; leave {name} out")
    query = None
    if isinstance(candidates, str):
        with _connection_lock(con):  # threads may share `con`: it refuses a second caller
            local, using = connection_local_tables(con)
        # TEMP objects and registered DataFrames are visible only on `con` itself, whose bare
        # names resolve in the database USE chose; a cursor's, in the one it was opened on.
        # So where the query runs decides which names it may use.
        def valid_names(read: tuple[str, ...]) -> set[str]:
            return known_tables(con, using if local & set(read) else None) | local

        checked = check_query(candidates, dialect, tables=valid_names)
        if dialect == "duckdb":
            _check_params(checked.placeholders, values)
        on_connection = bool(local & set(checked.tables))
        rows: Sequence[Any] = _rank(con, checked.sql, values, on_connection=on_connection,
                                    timeout=timeout, max_rows=max_rows)
        query = checked.to_dict()
    else:
        # Any Arrow-capable table, checked a column at a time; to_candidates finishes.
        rows = intake(arrow_table(candidates))
    return pack_rows(con, rows, budget=budget, config=config, store=store, query=query,
                     namespace=namespace, session_id=session_id)


def pack_rows(con: duckdb.DuckDBPyConnection, rows: Sequence[Any], *,
              budget: int, config: PackingConfig | Mapping[str, Any] | str | None = None,
              store: bool = True, query: dict[str, Any] | None = None,
              namespace: str | None = None, session_id: str | None = None) -> MemoryBundle:
    """pack() for candidate rows already in Python (dicts): the CLI and MCP server use it."""
    config = parse_config(config)
    for name, value in (("namespace", namespace), ("session_id", session_id)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{name} must be text (or None), got {type(value).__name__} "
                              f"{value!r}; pass str({name})")
        if value is not None and not store:
            # They label what is stored; a pack that stores nothing took them in silence.
            raise ConfigError(f"{name} names the receipt chain or session a stored bundle "
                              f"extends, but store=False stores nothing, so {name}={value!r} "
                              f"would be ignored; leave {name} out, or pass store=True")
    validated = CheckedCandidates(to_candidates(rows))
    # Persisted line costs (rms_line_costs) spare a new process from re-tokenizing; they
    # are checked, so a wrong one cannot change the bundle.
    bundle, counter, corrections = pack_checked(con, validated, budget=budget,
                                                config=config, store=store)
    if not store:
        return bundle
    try:
        stored = store_bundle(con, bundle, validated, namespace=namespace,
                              session_id=session_id, query=query)
    except duckdb.InvalidInputException as exc:
        if "read-only" not in str(exc):
            raise
        raise ReceiptError(
            "cannot store the bundle: the database is open read-only; pass store=False to "
            "pack without storing, or open it with rms_duck.connect(path)") from None
    if counter is not None:
        _persist_costs(con, counter, corrections, receipt_id=stored.receipt_id)
    return replace(bundle, receipt_id=stored.receipt_id)


def _persist_costs(con: duckdb.DuckDBPyConnection, counter: Any,
                   corrections: dict[str, int], *, receipt_id: str) -> None:
    """Save the line costs this pack counted and correct the wrong stored ones. The bundle
    and receipt are committed already and rms_line_costs is only a cache, so no failure
    here may fail the pack: a caller told it failed would pack and store it again. Losing a
    race for the same line to a concurrent writer (a duplicate-key or write-write conflict)
    passes in silence; anything else (a full disk, say) is a warning."""
    try:
        persist_counter(con, counter)
        if corrections:
            repair_line_costs(con, corrections, encoding=counter.encoding)
    except (duckdb.TransactionException, duckdb.ConstraintException):
        pass
    except duckdb.Error as exc:
        warnings.warn(RmsWarning(
            f"the bundle is stored (receipt {receipt_id}), but its line costs could not be "
            f"cached in rms_line_costs ({type(exc).__name__}: {str(exc).splitlines()[0]}); "
            "later packs count those lines again: see to the database (disk space, say)"),
            stacklevel=3)


def known_tables(con: duckdb.DuckDBPyConnection, database: str | None = None) -> set[str]:
    """Every table and view name a query may read, as DuckDB resolves it from `database`
    (default: the one a cursor starts in): db.schema.name anywhere; db.name for a
    database's main schema; schema.name and a bare name only inside `database` (a bare
    name found in no searched schema would become a file or Python-variable scan). Names
    with a dot in a part are left out: joined with dots they would read as other parts."""
    cur = con.cursor()  # never the shared connection: another thread may be using it
    try:
        rows = cur.execute(
            "SELECT database_name, schema_name, table_name, system.main.current_database() "
            "FROM system.main.duckdb_tables() WHERE NOT internal UNION ALL SELECT "
            "database_name, schema_name, view_name, system.main.current_database() "
            "FROM system.main.duckdb_views() WHERE NOT internal").fetchall()
    finally:
        cur.close()
    names: set[str] = set()
    for db, schema, name, current in rows:
        if "." in db or "." in schema or "." in name:
            continue
        db, schema, name = (v.translate(ASCII_LOWER) for v in (db, schema, name))
        names.add(f"{db}.{schema}.{name}")
        if schema == "main":
            names.add(f"{db}.{name}")  # d.notes: an attached database d's main schema
        if db == (database if database is not None else current).translate(ASCII_LOWER):
            names.add(f"{schema}.{name}")
            if schema == "main":
                names.add(name)
    return names


_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def _connection_lock(con: duckdb.DuckDBPyConnection) -> threading.Lock:
    """One lock per connection: what rms_duck runs on a shared connection itself (not on a
    cursor) waits its turn instead of meeting DuckDB's "connection is busy" refusal."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(con)
        if lock is None:
            lock = _LOCKS[con] = threading.Lock()
        return lock


def connection_local_tables(con: duckdb.DuckDBPyConnection) -> tuple[set[str], str]:
    """Names (bare and qualified) of TEMP tables and views, registered DataFrames included:
    objects only this connection sees, so a query reading one must run on it, not a cursor.
    Also the database the connection's bare names resolve in (it follows USE)."""
    rows = con.execute(
        "SELECT schema_name, table_name, system.main.current_database() "
        "FROM system.main.duckdb_tables() WHERE database_name = 'temp' "
        "UNION ALL SELECT schema_name, view_name, system.main.current_database() "
        "FROM system.main.duckdb_views() WHERE database_name = 'temp' AND NOT internal "
        "UNION ALL SELECT NULL, NULL, system.main.current_database()").fetchall()
    names: set[str] = set()
    for schema, name, _ in rows:
        if schema is None or "." in schema or "." in name:
            continue
        schema, name = schema.translate(ASCII_LOWER), name.translate(ASCII_LOWER)
        names.update((name, f"{schema}.{name}", f"temp.{schema}.{name}"))
        if schema == "main":
            names.add(f"temp.{name}")
    return names, rows[-1][2]


_BATCH_ROWS = 10_000


def _check_limits(timeout: object, max_rows: object) -> None:
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not timeout > 0 or timeout == float("inf")):
        raise ConfigError(f"timeout must be a positive number of seconds or None, got "
                          f"{timeout!r}; pass for example timeout=5")
    if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int)
                                 or max_rows <= 0):
        raise ConfigError(f"max_rows must be a positive whole number or None, got "
                          f"{max_rows!r}; pass for example max_rows=100_000")


def _rank(con: duckdb.DuckDBPyConnection, sql: str,
          params: list[Any] | dict[str, Any], *,
          on_connection: bool, timeout: float | None, max_rows: int | None) -> list[Row]:
    """The guarded query's rows, the lexical index refreshed first when the query reads it.
    Another thread or connection may add a node between that refresh and the query, which
    rms_candidates' guard then refuses as an out-of-date index: refresh and run it again."""
    lexical = reads_lexical_index(sql)
    attempt = 0
    while True:
        attempt += 1
        refreshable = False
        if lexical:
            with _connection_lock(con):
                refreshable = ensure_index(con) is not None
        try:
            if on_connection:
                with _connection_lock(con):
                    return _run_read_only(con, sql, params, on_connection=True,
                                          timeout=timeout, max_rows=max_rows)
            return _run_read_only(con, sql, params, timeout=timeout, max_rows=max_rows)
        except duckdb.Error as exc:
            if not (refreshable and index_went_stale(exc)) or attempt == _RANK_ATTEMPTS:
                raise


def _query_params(params: Sequence[Any] | Mapping[str, Any] | None
                  ) -> list[Any] | dict[str, Any]:
    """`params` as DuckDB binds them: a dict for $name placeholders, a list for ?. A plain
    list() bound a dict's keys as the values (params={"q": question} ranked for the word
    'q') and failed $name queries with "Mixing named and positional parameters", and took
    a string's letters as the values."""
    if params is None:
        return []
    if isinstance(params, Mapping):
        values: list[Any] | dict[str, Any] = dict(params)
    # A set has no order, so its values would meet the placeholders in hash order.
    elif isinstance(params, (str, bytes, set, frozenset)) or not isinstance(params, Iterable):
        raise ConfigError(f"params must be a list of values for the query's ? placeholders "
                          f"(or a dict for $name ones), got {type(params).__name__} "
                          f"{params!r:.80}; pass for example params=[question, namespace]")
    else:
        values = list(params)
    # DuckDB refuses such text with "Python Conversion Failure: cannot encode str as UTF-8",
    # naming no parameter (an MCP agent's JSON "\ud800" escape gives one).
    for key, value in (values.items() if isinstance(values, dict) else enumerate(values)):
        try:
            found = first_surrogate(value)
        except RecursionError:  # DuckDB's client could not have bound it either
            raise _too_deep(values) from None
        if found is not None:
            name = f"params[{key!r}]" if isinstance(values, dict) else f"params[{key}]"
            raise ConfigError(
                f"{name} holds a lone surrogate ({found!r}, half of a UTF-16 pair), which "
                "DuckDB cannot take as text; fix the text, for example "
                "text.encode('utf-8', 'replace').decode()")
    return values


def _check_params(placeholders: tuple[str, ...], values: list[Any] | dict[str, Any]) -> None:
    """Values for exactly the query's placeholders: DuckDB's own errors ("Values were not
    provided for the following parameters: 1, 2", "Parameter argument/count mismatch")
    name neither `params` nor what to pass. Numbered ($1) placeholders, and a mix of kinds,
    are left to DuckDB."""
    positional = [name for name in placeholders if name == "?"]
    named = sorted({name for name in placeholders if name != "?"})
    if any(name.isdigit() for name in named) or (positional and named):
        return
    if positional and isinstance(values, list) and len(values) != len(positional):
        raise ConfigError(
            f"params gives {len(values)} value(s) {values!r:.80}, but the ranking query has "
            f"{len(positional)} ? placeholder(s); pass a list of {len(positional)} value(s), "
            "one per ?, in order, for example params=[question, namespace] for "
            "rms_candidates(?, ?)")
    if positional and isinstance(values, dict):
        raise ConfigError(
            f"params is a dict {values!r:.80}, but the ranking query has {len(positional)} ? "
            "placeholder(s), which take a list; pass a list, one value per ?, in order, or "
            "write the placeholders as $name")
    if named and isinstance(values, list):
        raise ConfigError(
            f"params is a list {values!r:.80}, but the ranking query has $name placeholders "
            f"({', '.join('$' + name for name in named)}); pass a dict, for example "
            f"params={{{', '.join(repr(name) + ': ...' for name in named)}}}")
    if named and isinstance(values, dict):
        lacking = [name for name in named if name not in values]
        extra = sorted(str(key) for key in values if key not in named)
        if lacking or extra:
            raise ConfigError(
                "params must give a value for each $name placeholder of the ranking query ("
                f"{', '.join('$' + name for name in named)}), got keys "
                f"{sorted(map(str, values))}"
                + (f"; add {', '.join(map(repr, lacking))}" if lacking else "")
                + (f"; drop {', '.join(map(repr, extra))}" if extra else ""))
    if not placeholders and values:
        raise ConfigError(
            f"params gives {len(values)} value(s) {values!r:.80}, but the ranking query has no "
            "placeholder; leave params out, or write ? (or $name) where each value goes")


def _run_read_only(con: duckdb.DuckDBPyConnection, sql: str,
                   params: list[Any] | dict[str, Any] | None,
                   *, on_connection: bool = False, timeout: float | None = None,
                   max_rows: int | None = None) -> list[Row]:
    """Run the guarded query inside a READ ONLY transaction: the engine's own second wall.

    It runs on a cursor of its own (thread-safe, no clash with the caller's transaction)
    unless it reads the connection's TEMP objects, which a cursor cannot see. Rows are
    streamed, so max_rows stops the query once it is passed; timeout interrupts it.
    """
    # A cursor sees only the macros stored in the file; give it the shipped SQL as TEMP
    # copies when the query calls one (the stored bodies are not trusted). That cursor is
    # kept for the next query: creating the macros costs more than most rankings.
    kept = not on_connection and bool(_RMS_CALL.search(sql))
    cur = con if on_connection else macro_cursor(con) if kept else cursor(con)
    fired: list[bool] = []

    def interrupt() -> None:
        fired.append(True)
        cur.interrupt()

    timer = threading.Timer(timeout, interrupt) if timeout is not None else None
    try:
        # Asked before BEGIN: a BEGIN inside the caller's open transaction would abort it,
        # and their COMMIT would then drop their uncommitted rows without a word.
        if on_connection and transaction_open(cur):
            raise QueryRejectedError(
                "the ranking query reads this connection's TEMP tables or registered "
                "DataFrames, so it must run on the connection itself, which has a "
                "transaction open; COMMIT or ROLLBACK it before calling rms_duck.pack")
        _begin_read_only(cur, kept)
        try:
            if timer is not None:
                timer.start()
            rows: list[Row] = []
            try:
                relation = cur.sql(sql, params=params or [])
            except RecursionError:  # DuckDB's client copies nested values recursively
                raise _too_deep(params) from None
            for batch in relation.to_arrow_reader(_BATCH_ROWS):
                rows.extend(intake(batch))  # checked a column at a time, as for tables
                if max_rows is not None and len(rows) > max_rows:
                    raise QueryLimitError(
                        f"ranking query returned more than max_rows={max_rows:,} rows; rank "
                        "fewer candidates (add a LIMIT or a tighter WHERE) or raise max_rows")
            return rows
        except (duckdb.InterruptException, OSError) as exc:
            # An error DuckDB meets while Arrow streams the rows reaches Python as Arrow's
            # OSError: a timeout's interrupt, or the query's own runtime error.
            if isinstance(exc, OSError) and not fired:
                raise _duckdb_error(exc)(f"the ranking query failed while its rows were "
                                         f"read: {exc}") from exc
            raise QueryLimitError(
                f"ranking query ran longer than timeout={timeout} s and was interrupted; make "
                "it cheaper (an index, a LIMIT, fewer joins) or raise timeout") from None
        except RuntimeError as exc:
            # Ctrl-C while DuckDB runs the query: its client stops the query and raises
            # RuntimeError('Query interrupted'); a caller stopping work expects Python's own.
            if str(exc) == "Query interrupted" and not fired:
                raise KeyboardInterrupt from exc
            raise
        finally:
            if timer is not None:
                timer.cancel()
                # A timer already past its check may still interrupt: wait for it here,
                # or it could stop the next query on a kept cursor.
                if timer.is_alive():
                    timer.join()
            cur.execute("ROLLBACK")
    finally:
        if not on_connection and not kept:
            cur.close()


def _too_deep(params: list[Any] | dict[str, Any] | None) -> ConfigError:
    return ConfigError(f"params hold a value nested too deeply to bind ({_first_deep(params)}); "
                       "pass flat values for the query's placeholders (a list or struct a few "
                       "levels deep)")


def _first_deep(params: list[Any] | dict[str, Any] | None) -> str:
    """Which parameter is nested too deeply: 'params[1]' or "params['q']"."""
    items = params.items() if isinstance(params, dict) else enumerate(params or [])
    for key, value in items:
        depth = 0
        while isinstance(value, (list, tuple, dict)) and value and depth <= 100:
            value = next(iter(value.values())) if isinstance(value, dict) else value[0]
            depth += 1
        if depth > 100:
            return f"params[{key!r}], more than 100 levels"
    return "more than Python's recursion limit"


def _duckdb_error(exc: OSError) -> type[duckdb.Error]:
    """The DuckDB exception class an error raised in the first batch would have had: its
    message names it ("Conversion Error: ..." is a ConversionException)."""
    kind = str(exc).partition(" Error:")[0]
    name = "".join(word[:1].upper() + word[1:] for word in kind.split()) + "Exception"
    found = getattr(duckdb, name, None)
    return found if isinstance(found, type) and issubclass(found, duckdb.Error) else duckdb.Error


def _begin_read_only(cur: duckdb.DuckDBPyConnection, kept: bool) -> None:
    try:
        cur.execute("BEGIN TRANSACTION READ ONLY")
    except duckdb.TransactionException:
        if not kept:
            raise
        # A kept cursor left inside a transaction (an interrupted call): end it, go on.
        cur.execute("ROLLBACK")
        cur.execute("BEGIN TRANSACTION READ ONLY")


# Ranking queries run again after another writer made the index stale under them.
_RANK_ATTEMPTS = 5
_RMS_CALL = re.compile(r"\b(rms_\w+|pack_context)\"?\s*\(", re.IGNORECASE)

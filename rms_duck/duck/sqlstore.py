"""rms_store(): pack and store from SQL, for pipelines with no Python step (dbt, SQL jobs).

`SELECT rms_store(list(c), 400, namespace := 'team') FROM ... GROUP BY ...` packs each group
exactly as pack_context() does and stores the bundle row with its sealed, chained receipt,
as rms_duck.pack() does, returning the receipt_id. Each call of the UDF (DuckDB passes up to
2,048 groups at once, one call per thread at a time) packs all its groups before it stores
any, so a bad budget, config or candidate stores nothing of that call. It appends them in
group order, in one transaction per call, with one Arrow insert per table for each share
(storage.py): a transaction per bundle cost about 10 ms each, 26 times the pack itself.
The groups this process packs are inserted while the workers pack the rest, and the
transaction commits once every share is packed and inserted: what is left after the last
reply is adding the workers' groups. The UDF stores through a cursor of the connection
that called it, so the bundles commit independently of the statement that called it: if
that statement fails later (in a later call, or for another reason), the bundles already
stored stay, each with a valid receipt (the chain is append-only).
"""

from __future__ import annotations

import secrets
import threading
import weakref
from typing import Any

import duckdb
import pyarrow as pa

from ..candidates import CheckedCandidates, to_candidates
from ..config import PackingConfig, parse_config
from ..errors import ReceiptError, RmsError
from ..packing.batches import candidate_rows, in_group, pack_in_turn
from ..packing.gcpause import gc_paused
from ..packing.parallel import from_ipc, in_parts
from ..tokens.bulk import default_processes
from .cursors import cursor
from .storage import AppendWhilePacking, Pending, append_pending, pending_bundle

STORE_PARAMETERS = ("rms_candidate[]", "BIGINT", "VARCHAR", "VARCHAR", "VARCHAR", "BIGINT")
# The text in sql/python_macros.sql that install_temp_macros replaces with connection_number().
STORE_CONNECTION = "getvariable('rms_store_connection')"

# DuckDB keeps a Python UDF in its system catalog, shared by every connection and cursor of
# the database, but the callable lives only as long as the Python connection that registered
# it. So the UDF is this module's function (it lives as long as the process), and it stores
# through the connection named by its last argument: the connection or cursor whose TEMP
# rms_store macro called it, which is running the query. Held weakly: the UDF never keeps a
# connection, its database or its file lock alive.
# The number is random, not counted: SQL on one connection could otherwise call
# rms_store_udf(..., 1) and store through another connection of the process (another
# database file, or one writable where its own is read-only or has external access off).
# A connection's TEMP macros, which hold its number, are visible to that connection only.
_CONNECTIONS: weakref.WeakValueDictionary[int, duckdb.DuckDBPyConnection] = \
    weakref.WeakValueDictionary()
_NUMBERS_GUARD = threading.Lock()


def connection_number(con: duckdb.DuckDBPyConnection) -> int:
    """An unguessable number naming `con` to rms_store's UDF (a new one each time TEMP
    macros are made); it fits the UDF's BIGINT argument."""
    with _NUMBERS_GUARD:
        number = secrets.randbits(62) + 1
        while number in _CONNECTIONS:
            number = secrets.randbits(62) + 1
        _CONNECTIONS[number] = con
    return number


def rms_store_udf(candidates: pa.ChunkedArray, budgets: pa.ChunkedArray,
                  configs: pa.ChunkedArray, namespaces: pa.ChunkedArray,
                  sessions: pa.ChunkedArray, connections: pa.ChunkedArray) -> pa.Array:
    """The Arrow UDF behind rms_store(): packs the call's groups, then stores them through a
    cursor of the connection that called it."""
    numbers = [n for n in connections.unique().to_pylist() if n is not None]
    con = _CONNECTIONS.get(numbers[0]) if len(numbers) == 1 else None
    if con is None:  # rms_store_udf called without the rms_store macro
        raise ReceiptError("rms_store has no connection to store through; call rms_store() "
                           "on a connection prepared by rms_duck.connect() or "
                           "rms_duck.register(con), not rms_store_udf() directly")
    columns = [budgets.to_pylist(), configs.to_pylist(), namespaces.to_pylist(),
               sessions.to_pylist()]
    cur = cursor(con)
    try:
        return pa.array(_stored(cur, candidates, columns), type=pa.string())
    finally:
        cur.close()


def _stored(cur, candidates: pa.ChunkedArray, columns: list[list[Any]]) -> list[str]:
    """Every group packed, then stored in one transaction; the receipt_ids in order. A call
    of many groups is packed across processes, as pack_context's (parallel.py), and the
    groups packed here are stored while the workers pack theirs."""
    with AppendWhilePacking(cur) as early:
        shares = in_parts(candidates, columns, configs=columns[1],
                          processes=default_processes(), function=_PENDING_PART,
                          here=_packed_here, meanwhile=early.begin)
        if shares is None:  # all packed here below: in_parts began nothing
            early.abandon()
            pending, stored = _packed_here(candidates, columns), None
        else:
            pending = [row for share in shares for row in share]
            stored = early.finish(pending[len(shares[0]):])
    if stored is None:
        try:
            stored = append_pending(cur, pending)
        except duckdb.Error as exc:
            fix = ("open the database writable, or use pack_context() to pack without "
                   "storing" if "read-only" in str(exc) else
                   "run rms_duck.verify_receipts(con) on this database, then the "
                   "statement again")
            raise ReceiptError(f"rms_store could not store the bundles: "
                               f"{str(exc).splitlines()[0]}; {fix}") from None
    return [row.receipt_id for row in stored]


_PENDING_PART = "rms_duck.duck.sqlstore:pending_part"


def pending_part(ipc: bytes, budgets: list[Any], configs: list[Any], namespaces: list[Any],
                 sessions: list[Any]) -> list[Pending]:
    """In a worker process: the groups sent, packed and ready to store here."""
    return _packed_here(from_ipc(ipc), [budgets, configs, namespaces, sessions])


def _packed_here(candidates: Any, columns: list[list[Any]]) -> list[Pending]:
    with gc_paused():  # once a call, as pack_context's slices do: not once a bundle
        return _packed(candidates, *columns)


def _packed(candidates: Any, budgets: list[Any], configs: list[Any], namespaces: list[Any],
            sessions: list[Any]) -> list[Pending]:
    """Every group of the call packed, before any is stored: a bad one stores nothing."""
    if isinstance(candidates, pa.Array):
        candidates = pa.chunked_array([candidates])
    parsed: dict[Any, PackingConfig] = {}
    packed = []
    for rows, budget, raw, namespace, session in zip(
            candidate_rows(candidates), budgets, configs, namespaces, sessions, strict=False):
        try:
            config = parsed.get(raw)
            if config is None:
                config = parsed[raw] = parse_config(raw)
            # A NULL struct in the list reaches to_candidates, which names it.
            validated = CheckedCandidates(to_candidates(rows or []))  # type: ignore[arg-type]
            bundle = pack_in_turn(validated, budget=budget, config=config)
        except RmsError as exc:
            raise in_group(exc, rows) from exc.__cause__
        packed.append((bundle, validated, namespace, session))
    return [pending_bundle(bundle, validated, namespace=namespace, session_id=session)
            for bundle, validated, namespace, session in packed]

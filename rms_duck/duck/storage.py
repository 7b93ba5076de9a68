"""Store bundles and their receipts atomically, extending each namespace's receipt hash chain.

store_bundle() appends one packed bundle; append_pending() appends many in one transaction
(rms_store's groups, store_batches' rows), with one INSERT per table for all of them;
AppendWhilePacking begins such a transaction before the last of a batch's groups are packed
(rms_store across processes). Each receipt is sealed from the template written where its
bundle was packed (receipts.receipt_template), so appending only joins and hashes.

Each receipt's canonical JSON carries the previous receipt's sha256 in the same chain
namespace and a sequence number that is UNIQUE per namespace. Two writers that race for
the same position conflict in DuckDB; the loser rolls back and retries on the new tip.

DuckDB resolves write conflicts optimistically (the loser aborts), so threads of one
process appending to one chain would mostly abort each other. A process-wide lock queues
them instead; no other process can open the same database file for writing, so the lock
plus UNIQUE (chain_namespace, seq) covers every writer. The lock is held for the few
statements of one store, and, by an rms_store call packed across processes, while the
workers finish the groups it has not inserted yet (AppendWhilePacking).

The chain's tip comes from rms_chain_heads (one row per chain, updated in the same
transaction), confirmed by a lookup of that one receipt, so an append does not scan
rms_receipts and its cost does not grow with the number stored. A missing, stale or lagging
head row (an older database, an edit) falls back to the scan and is rewritten. Only write
conflicts are retried: a full disk or another I/O failure stops at once.
"""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import duckdb
import pyarrow as pa

from ..bundle import MemoryBundle
from ..config import PackingConfig
from ..errors import CandidateError, ConfigError, ReceiptError
from ..escape import canonical_json
from ..receipts import RECEIPT_VERSION, inputs_json, receipt_template, seal_template
from ..records import Candidate
from ..sha import sha256_text
from ..timefmt import as_utc
from .cursors import cursor
from .surrogates import config_surrogate_error, surrogate_error

_RETRIES = 200
# Bundles store_batches appends per transaction (rms_store appends each call's in one).
BATCH_ROWS = 1_000
# In a list so that a forked child can be given a fresh one: a fork taken while another
# thread appends (or waits on workers in the middle of an append, AppendWhilePacking)
# would otherwise leave the child's copy locked for ever.
_APPEND_LOCK = [threading.Lock()]
if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=lambda: _APPEND_LOCK.__setitem__(0, threading.Lock()))
_IO_FAILURE = re.compile(
    r"no space left|file too large|disk quota|read-only file system|could not write|"
    r"could not (?:truncate|sync|fsync)|io error|i/o error", re.IGNORECASE)


class Stored(NamedTuple):
    bundle_id: str
    receipt_id: str
    receipt_sha256: str
    seq: int
    chain_namespace: str = ""


class Pending(NamedTuple):
    """A packed bundle waiting for its place in a receipt chain: the rms_bundles values it
    has already, and its receipt's canonical text cut around the fields only the append
    knows (receipts.receipt_template), written where the bundle was packed. A tuple: a
    worker's share comes back pickled, and a dataclass took 16 times as long to unpickle."""

    chain: str
    template: tuple[str, ...]
    inputs: str
    context: str
    context_sha256: str
    context_format: str
    budget: int
    available: int
    tokens_used: int
    flags: list[str]
    included: int
    excluded: int
    metrics: Mapping[str, Any]
    session_id: str | None
    query_text: str | None = None
    # The version its receipt body records: a table packed by an earlier release
    # (store_batches) keeps its own, which replay packs by.
    receipt_version: int = RECEIPT_VERSION
    # What store_batches matches a stored copy of this bundle by (batchstore._key).
    match_key: tuple[str, str, str, str] | None = None


def chain_namespace(candidates: Sequence[Candidate], namespace: str | None) -> str:
    """The chain a receipt joins: the given namespace, else the candidates' shared one, else ''."""
    if namespace is not None:
        return namespace
    names = {c.namespace_id for c in candidates}
    return names.pop() or "" if len(names) == 1 else ""


def pending_bundle(bundle: MemoryBundle, candidates: Sequence[Candidate], *,
                   namespace: str | None = None, session_id: str | None = None,
                   query: dict[str, Any] | None = None) -> Pending:
    """A bundle packed in this process, ready to append (its inputs as canonical JSON)."""
    refused = _config_refused(bundle.config)
    if refused is not None:
        raise refused
    chain, inputs = chain_namespace(candidates, namespace), inputs_json(candidates)
    template = receipt_template(bundle.receipt_fragments, chain_namespace=chain,
                                inputs_sha256=sha256_text(inputs), query=query,
                                session_id=session_id)
    return Pending(chain, template, inputs, bundle.context, bundle.context_sha256,
                   bundle.config.context_format, bundle.context_budget, bundle.available,
                   bundle.tokens_used, list(bundle.flags), len(bundle.included),
                   bundle.excluded_count, bundle.metrics, session_id,
                   (query or {}).get("sql"))


def _config_refused(config: PackingConfig) -> ConfigError | None:
    """config_surrogate_error() of every config field, asked once per clean config object:
    the bundles of one GROUP BY share their parsed config (PackingConfig is frozen). Keyed
    by identity, with the object kept, so a new config at a reused address is checked; a
    refused one is checked again each time, for an error of its own."""
    known = _CLEAN_CONFIGS.get(id(config))
    if known is not None and known is config:
        return None
    refused = config_surrogate_error({f.name: getattr(config, f.name) for f in fields(config)})
    if refused is None:
        if len(_CLEAN_CONFIGS) >= 64:
            _CLEAN_CONFIGS.clear()
        _CLEAN_CONFIGS[id(config)] = config
    return refused


_CLEAN_CONFIGS: dict[int, PackingConfig] = {}


def store_bundle(con: duckdb.DuckDBPyConnection, bundle: MemoryBundle,
                 candidates: Sequence[Candidate], *, namespace: str | None = None,
                 session_id: str | None = None, query: dict[str, Any] | None = None,
                 now: datetime | None = None) -> Stored:
    """Insert the bundle row and its receipt in one transaction; retry on write conflicts.

    Raises:
        ReceiptError: other writers won the race for the chain's next seq every time.
    """
    row = pending_bundle(bundle, candidates, namespace=namespace, session_id=session_id,
                         query=query)
    cur = cursor(con)
    try:
        return append_pending(cur, [row], now=now)[0]
    except (CandidateError, duckdb.Error) as exc:
        # DuckDB's message names no field (or, for a namespace, not even a candidate).
        located = surrogate_error(candidates, namespace=namespace, session_id=session_id) \
            if "surrogate" in str(exc) else None
        if located is None:
            raise
        raise located from None
    finally:
        cur.close()


def append_pending(cur, rows: Sequence[Pending], *, now: datetime | None = None,
                   held: Callable[[Any, Sequence[Pending]], list[bool]] | None = None
                   ) -> list[Stored]:
    """Append the bundles in order, in one transaction, each receipt chained to the one
    before it in its chain; retried from a scan of the chain (sealed again) when another
    writer wins. One statement per table for all of them: a transaction per bundle cost
    about 10 ms each, 26 times the pack of a small bundle.

    `held(cur, rows)`, when given, says which rows the store already holds (one bool per
    row); those are left out. It is asked inside each attempt's transaction, under the
    append lock, so two threads storing the same rows cannot both find them missing.
    Returns the Stored of the rows appended, in order."""
    if not rows:
        return []
    chains = list(dict.fromkeys(row.chain for row in rows))
    where = (f"the bundle and receipt for chain_namespace {chains[0]!r}" if len(rows) == 1
             else f"{len(rows):,} bundles and receipts for chain_namespace "
                  + ", ".join(repr(chain) for chain in chains[:5])
                  + (f" and {len(chains) - 5} more" if len(chains) > 5 else ""))
    scan = False
    for attempt in range(_RETRIES):
        try:
            with _APPEND_LOCK[0]:
                # Read inside the lock: times must not go down as seq goes up.
                created = (as_utc(now).replace(tzinfo=UTC) if now is not None
                           else datetime.now(UTC))
                return _store_once(cur, rows, created, scan=scan, held=held)
        except duckdb.Error as exc:
            _rollback(cur)
            if not _is_conflict(exc):
                raise _failure(exc, where) from exc
            conflict = exc
            scan = True  # another writer moved the tip: find it in rms_receipts itself
            time.sleep(min(0.001 * (attempt + 1), 0.05))
        except BaseException:
            _rollback(cur)
            raise
    what = (f"a receipt to chain_namespace {chains[0]!r}" if len(rows) == 1
            else where.replace("bundles and receipts for", "receipts to"))
    raise ReceiptError(
        f"could not append {what} after {_RETRIES} attempts (last conflict: "
        f"{str(conflict).splitlines()[0]}); nothing was stored: retry the pack, or write "
        "from fewer connections at once") from conflict


def _is_conflict(exc: duckdb.Error) -> bool:
    """A lost race for the chain's next seq or a write-write conflict: worth retrying."""
    text = str(exc)
    if _IO_FAILURE.search(text) or isinstance(exc, duckdb.IOException):
        return False
    if isinstance(exc, duckdb.ConstraintException):
        return "chain_namespace" in text  # UNIQUE (chain_namespace, seq) or the heads row
    return isinstance(exc, duckdb.TransactionException) and "conflict" in text.lower()


def _failure(exc: duckdb.Error, where: str) -> Exception:
    """The error to raise for a failed append; `where` names what it was writing."""
    first = str(exc).splitlines()[0]
    if isinstance(exc, duckdb.ConversionException) and "surrogate" in str(exc):
        # Only Python text can hold one; the context escapes it, but DuckDB's JSON type
        # refuses it in the stored inputs.
        return CandidateError(
            "a candidate's text holds a lone surrogate (half of a UTF-16 pair, such as "
            "'\\udfff'), which the bundle's stored inputs cannot hold; nothing was stored: "
            "fix the text first (for example text.encode('utf-8', 'replace').decode()), or "
            "pack without storing (rms_duck.pack(..., store=False), pack_batches() in place "
            "of store_batches(), pack_context() in place of rms_store())")
    if _IO_FAILURE.search(str(exc)) or isinstance(exc, duckdb.IOException):
        return ReceiptError(
            f"could not write {where}: the database file cannot grow ({first}); nothing was "
            "stored: free disk space (or raise the file size limit) and pack again")
    return exc


def _store_once(cur, rows: Sequence[Pending], created: datetime, *, scan: bool = False,
                held: Callable[[Any, Sequence[Pending]], list[bool]] | None = None
                ) -> list[Stored]:
    append = _Append(cur, created, scan=scan)
    if held is not None:
        rows = [row for row, stored in zip(rows, held(cur, rows), strict=True) if not stored]
    append.add(rows)
    return append.commit()


class _Append:
    """One transaction appending bundles to their chains: begun, given rows (add) once or
    more, then committed. Each receipt is sealed on the one before it in its chain, and
    stamped one microsecond after the row added before it (in any chain): views that order
    a session's bundles by time (rms_session_metrics) see the order they were stored in,
    not a tie."""

    def __init__(self, cur, created: datetime, *, scan: bool = False) -> None:
        self.cur, self.created, self.scan = cur, created, scan
        # chain -> (newest seq, its receipt_sha256, that as JSON, whether it has a head row)
        self.tips: dict[str, tuple[int, str | None, str, bool]] = {}
        self.stored: list[Stored] = []
        cur.execute("BEGIN TRANSACTION")

    def add(self, rows: Sequence[Pending]) -> None:
        """Seal and insert `rows`, in order, after those added before."""
        if not rows:
            return
        cur, tips = self.cur, self.tips
        for chain in dict.fromkeys(row.chain for row in rows):
            if chain not in tips:
                last, prev, has_head = _tip(cur, chain, self.scan)
                # The tip's digest comes from the table: written as JSON like any text.
                tips[chain] = (last or 0, prev, canonical_json(prev), has_head)
        bundles, receipts = [], []
        created, first = self.created, len(self.stored)
        for i, row in enumerate(rows, first):
            created_at = created + timedelta(microseconds=i) if i else created
            last, prev, prev_json, has_head = tips[row.chain]
            seq = last + 1
            bundle_id, receipt_id = new_uuid(), new_uuid()
            # In APPEND_FIELDS order. UUIDs, a UTC time and an int: JSON writes them as
            # they are, quoted or not.
            text, digest = seal_template(row.template, (
                f'"{bundle_id}"', f'"{created_at.isoformat()}"', prev_json,
                f'"{receipt_id}"', str(seq)))
            tips[row.chain] = (seq, digest, f'"{digest}"', has_head)
            m = row.metrics
            bundles.append((bundle_id, created_at, row.chain, row.session_id, row.query_text,
                            row.context_format, row.budget, row.available, row.tokens_used,
                            row.context, row.context_sha256, row.flags, row.included,
                            row.excluded, m.get("str_mean"), m.get("str_p10"),
                            m.get("budget_efficiency"), m.get("budget_waste"), row.inputs))
            receipts.append((receipt_id, bundle_id, created_at, row.chain, seq, prev,
                             row.receipt_version, text, digest, row.context_sha256))
            self.stored.append(Stored(bundle_id, receipt_id, digest, seq, row.chain))
        _insert(cur, "rms_bundles", BUNDLE_COLUMNS, bundles)
        _insert(cur, "rms_receipts", RECEIPT_COLUMNS, receipts)

    def commit(self) -> list[Stored]:
        """Move each chain's head and commit; the Stored of every row added, in order."""
        cur = self.cur
        for chain, (newest, newest_sha256, _, has_head) in self.tips.items():
            if has_head:  # a plain UPDATE: an upsert costs several times more
                cur.execute("UPDATE rms_chain_heads SET seq = ?, receipt_sha256 = ? "
                            "WHERE chain_namespace = ?", [newest, newest_sha256, chain])
            else:
                cur.execute("INSERT INTO rms_chain_heads VALUES (?, ?, ?)",
                            [chain, newest, newest_sha256])
        cur.execute("COMMIT")
        return self.stored


class AppendWhilePacking:
    """An append begun before every bundle of a batch is packed (rms_store): the bundles
    packed in this process are sealed and inserted while the workers pack the rest, in one
    transaction that commits only once the rest are added, so a bad group in any share
    still stores nothing. It holds the append lock from begin() to the commit. Used as a
    context manager: leaving the block any way but through a finish() that committed rolls
    back what began and lets go of the lock. A failed begin() or finish() rolls back too:
    the rows are then appended by append_pending, which retries a lost race and names what
    failed."""

    def __init__(self, cur) -> None:
        self.cur = cur
        self._append: _Append | None = None
        self._lock: threading.Lock | None = None

    def __enter__(self) -> AppendWhilePacking:
        return self

    def __exit__(self, *exc: object) -> None:
        self.abandon()

    def begin(self, rows: Sequence[Pending]) -> None:
        """Seal and insert the first rows, in a transaction left open."""
        lock = _APPEND_LOCK[0]
        try:
            lock.acquire()
            self._lock = lock
            self._append = _Append(self.cur, datetime.now(UTC))
            self._append.add(rows)
        except duckdb.Error:
            self.abandon()  # append_pending appends every row, as without this
        except BaseException:
            self.abandon()
            raise

    def finish(self, rows: Sequence[Pending]) -> list[Stored] | None:
        """Add the rest and commit: the Stored of every row begun and added, in order.
        None when nothing began or the append failed (nothing is held then): append them
        all with append_pending."""
        append = self._append
        if append is None:
            self.abandon()
            return None
        try:
            append.add(rows)
            stored = append.commit()
        except duckdb.Error:
            self.abandon()
            return None
        self._append = None
        self.abandon()  # committed: only the lock is let go
        return stored

    def abandon(self) -> None:
        """Roll back what began, if anything, and let go of the lock, if held."""
        append, lock = self._append, self._lock
        self._append = self._lock = None
        try:
            if append is not None:
                _rollback(self.cur)
        finally:
            if lock is not None:
                lock.release()


def new_uuid() -> str:
    """str(uuid.uuid4()): 16 random bytes with the version 4 and RFC 4122 variant bits set,
    written from the bytes' hex. uuid.UUID's own arithmetic and formatting cost 2.5 µs an
    id, and a stored bundle takes two."""
    digits = os.urandom(16).hex()
    return (f"{digits[:8]}-{digits[8:12]}-4{digits[13:16]}-{_VARIANT[digits[16]]}"
            f"{digits[17:20]}-{digits[20:]}")


# The variant's hex digit (binary 10xx) for each random one: its two low bits kept.
_VARIANT = {digit: "89ab"[int(digit, 16) & 3] for digit in "0123456789abcdef"}


# Column order and Arrow types of rms_bundles and rms_receipts (sql/schema.sql).
BUNDLE_COLUMNS = (
    ("bundle_id", pa.string()), ("created_at", pa.timestamp("us", "UTC")),
    ("namespace_id", pa.string()), ("session_id", pa.string()), ("query_text", pa.string()),
    ("context_format", pa.string()), ("budget", pa.int32()), ("available", pa.int32()),
    ("tokens_used", pa.int32()), ("context", pa.string()), ("context_sha256", pa.string()),
    ("flags", pa.list_(pa.string())), ("included_count", pa.int32()),
    ("excluded_count", pa.int32()), ("str_mean", pa.float64()), ("str_p10", pa.float64()),
    ("budget_efficiency", pa.float64()), ("budget_waste", pa.float64()),
    # Text, which DuckDB parses as it goes into the JSON column: Arrow's JSON type went in
    # unchecked, and a lone surrogate's escape (\ud800), which Python's json reads, then
    # left a value no json_* function could read.
    ("inputs", pa.string()))
RECEIPT_COLUMNS = (
    ("receipt_id", pa.string()), ("bundle_id", pa.string()),
    ("created_at", pa.timestamp("us", "UTC")), ("chain_namespace", pa.string()),
    ("seq", pa.int64()), ("prev_sha256", pa.string()), ("receipt_version", pa.int32()),
    ("receipt", pa.string()), ("receipt_sha256", pa.string()), ("context_sha256", pa.string()))


def _insert(cur, table: str, columns: tuple[tuple[str, pa.DataType], ...],
            rows: list[tuple[Any, ...]]) -> None:
    """One row as parameters; more through one Arrow scan rather than a statement each."""
    if len(rows) == 1:
        cur.execute(f"INSERT INTO {table} VALUES ({', '.join('?' * len(columns))})",
                    list(rows[0]))
        return
    arrow = pa.table([pa.array([row[i] for row in rows], kind)
                      for i, (_, kind) in enumerate(columns)],
                     names=[name for name, _ in columns])
    cur.register("rms_batch_rows", arrow)
    try:
        cur.execute(f"INSERT INTO {table} BY NAME SELECT * FROM rms_batch_rows")
    finally:
        try:
            cur.unregister("rms_batch_rows")
        except duckdb.Error:
            # A failed INSERT aborted the transaction, and unregistering then fails too: let
            # the INSERT's own error (a write conflict to retry) reach the caller.
            pass


def _tip(cur, chain: str, scan: bool) -> tuple[int | None, str | None, bool]:
    """(seq, receipt_sha256) of the chain's newest receipt, or (None, None) for a new chain,
    and whether rms_chain_heads has a row for the chain."""
    head = cur.execute("SELECT seq, receipt_sha256 FROM rms_chain_heads "
                       "WHERE chain_namespace = ?", [chain]).fetchall()
    if head and not scan and cur.execute(
            "SELECT 1 FROM rms_receipts WHERE chain_namespace = ? AND seq = ? "
            "AND receipt_sha256 = ?", [chain, *head[0]]).fetchall():
        return head[0][0], head[0][1], True
    last, prev = cur.execute(
        "SELECT max(seq), arg_max(receipt_sha256, seq) FROM rms_receipts "
        "WHERE chain_namespace = ?", [chain]).fetchall()[0]
    return last, prev, bool(head)


def _rollback(cur) -> None:
    try:
        cur.execute("ROLLBACK")
    except duckdb.Error:
        pass

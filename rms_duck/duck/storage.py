"""Store a bundle and its receipt atomically, extending the namespace's receipt hash chain.

Each receipt's canonical JSON carries the previous receipt's sha256 in the same chain
namespace and a sequence number that is UNIQUE per namespace. Two writers that race for
the same position conflict in DuckDB; the loser rolls back and retries on the new tip.

DuckDB resolves write conflicts optimistically (the loser aborts), so threads of one
process appending to one chain would mostly abort each other. A process-wide lock queues
them instead; no other process can open the same database file for writing, so the lock
plus UNIQUE (chain_namespace, seq) covers every writer. The lock is held only for the few
statements of one store, which never wait on anything.

The chain's tip comes from rms_chain_heads (one row per chain, updated in the same
transaction), confirmed by a lookup of that one receipt, so an append does not scan
rms_receipts and its cost does not grow with the number stored. A missing, stale or lagging
head row (an older database, an edit) falls back to the scan and is rewritten. Only write
conflicts are retried: a full disk or another I/O failure stops at once.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb

from ..bundle import MemoryBundle
from ..errors import CandidateError, ReceiptError
from ..receipts import RECEIPT_VERSION, inputs_json, seal_fragments
from ..records import Candidate
from ..timefmt import as_utc
from .cursors import cursor

_RETRIES = 200
_APPEND_LOCK = threading.Lock()
_IO_FAILURE = re.compile(
    r"no space left|file too large|disk quota|read-only file system|could not write|"
    r"could not (?:truncate|sync|fsync)|io error|i/o error", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Stored:
    bundle_id: str
    receipt_id: str
    receipt_sha256: str
    seq: int


def chain_namespace(candidates: Sequence[Candidate], namespace: str | None) -> str:
    """The chain a receipt joins: the given namespace, else the candidates' shared one, else ''."""
    if namespace is not None:
        return namespace
    names = {c.namespace_id for c in candidates}
    return names.pop() or "" if len(names) == 1 else ""


def store_bundle(con: duckdb.DuckDBPyConnection, bundle: MemoryBundle,
                 candidates: Sequence[Candidate], *, namespace: str | None = None,
                 session_id: str | None = None, query: dict[str, Any] | None = None,
                 now: datetime | None = None) -> Stored:
    """Insert the bundle row and its receipt in one transaction; retry on write conflicts.

    Raises:
        ReceiptError: other writers won the race for the chain's next seq every time.
    """
    chain = chain_namespace(candidates, namespace)
    inputs = inputs_json(candidates)
    body = bundle.receipt_fragments
    cur = cursor(con)
    scan = False
    try:
        for attempt in range(_RETRIES):
            try:
                with _APPEND_LOCK:
                    # Read inside the lock: times must not go down as seq goes up.
                    created = (as_utc(now).replace(tzinfo=UTC) if now is not None
                               else datetime.now(UTC))
                    return _store_once(cur, bundle, body, inputs, chain, session_id, query,
                                       created, scan=scan)
            except duckdb.Error as exc:
                _rollback(cur)
                if not _is_conflict(exc):
                    raise _failure(exc, chain) from exc
                conflict = exc
                scan = True  # another writer moved the tip: find it in rms_receipts itself
                time.sleep(min(0.001 * (attempt + 1), 0.05))
            except BaseException:
                _rollback(cur)
                raise
        raise ReceiptError(
            f"could not append a receipt to chain_namespace {chain!r} after {_RETRIES} "
            f"attempts (last conflict: {str(conflict).splitlines()[0]}); nothing was stored: "
            "retry the pack, or write from fewer connections at once") from conflict
    finally:
        cur.close()


def _is_conflict(exc: duckdb.Error) -> bool:
    """A lost race for the chain's next seq or a write-write conflict: worth retrying."""
    text = str(exc)
    if _IO_FAILURE.search(text) or isinstance(exc, duckdb.IOException):
        return False
    if isinstance(exc, duckdb.ConstraintException):
        return "chain_namespace" in text  # UNIQUE (chain_namespace, seq) or the heads row
    return isinstance(exc, duckdb.TransactionException) and "conflict" in text.lower()


def _failure(exc: duckdb.Error, chain: str) -> Exception:
    first = str(exc).splitlines()[0]
    if isinstance(exc, duckdb.ConversionException) and "surrogate" in str(exc):
        # Only Python text can hold one; the context escapes it, but DuckDB's JSON type
        # refuses it in the stored inputs.
        return CandidateError(
            "a candidate's text holds a lone surrogate (half of a UTF-16 pair, such as "
            "'\\udfff'), which the bundle's stored inputs cannot hold; nothing was stored: "
            "pack with store=False, or fix the text first (for example "
            "text.encode('utf-8', 'replace').decode())")
    if _IO_FAILURE.search(str(exc)) or isinstance(exc, duckdb.IOException):
        return ReceiptError(
            f"could not write the bundle and receipt for chain_namespace {chain!r}: the "
            f"database file cannot grow ({first}); nothing was stored: free disk space (or "
            "raise the file size limit) and pack again")
    return exc


def _store_once(cur, bundle: MemoryBundle, body: dict[str, str], inputs: str, chain: str,
                session_id: str | None, query: dict[str, Any] | None,
                created: datetime, *, scan: bool = False) -> Stored:
    bundle_id, receipt_id = str(uuid.uuid4()), str(uuid.uuid4())
    cur.execute("BEGIN TRANSACTION")
    last, prev, has_head = _tip(cur, chain, scan)
    seq = (last or 0) + 1
    text, digest = seal_fragments(
        body, receipt_id=receipt_id, bundle_id=bundle_id, created_at=created,
        chain_namespace=chain, seq=seq, prev_sha256=prev, inputs=inputs, query=query,
        session_id=session_id)
    m = bundle.metrics
    cur.execute(
        "INSERT INTO rms_bundles VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [bundle_id, created, chain, session_id, (query or {}).get("sql"),
         bundle.config.context_format, bundle.context_budget, bundle.available,
         bundle.tokens_used, bundle.context, bundle.context_sha256, list(bundle.flags),
         len(bundle.included), len(bundle.excluded), m["str_mean"], m["str_p10"],
         m["budget_efficiency"], m["budget_waste"], inputs])
    cur.execute(
        "INSERT INTO rms_receipts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [receipt_id, bundle_id, created, chain, seq, prev, RECEIPT_VERSION, text, digest,
         bundle.context_sha256])
    if has_head:  # a plain UPDATE: an upsert costs several times more
        cur.execute("UPDATE rms_chain_heads SET seq = ?, receipt_sha256 = ? "
                    "WHERE chain_namespace = ?", [seq, digest, chain])
    else:
        cur.execute("INSERT INTO rms_chain_heads VALUES (?, ?, ?)", [chain, seq, digest])
    cur.execute("COMMIT")
    return Stored(bundle_id, receipt_id, digest, seq)


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

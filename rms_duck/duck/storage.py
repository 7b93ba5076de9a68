"""Store a bundle and its receipt atomically, extending the namespace's receipt hash chain.

Each receipt's canonical JSON carries the previous receipt's sha256 in the same chain
namespace and a sequence number that is UNIQUE per namespace. Two writers that race for
the same position conflict in DuckDB; the loser rolls back and retries on the new tip.

DuckDB resolves write conflicts optimistically (the loser aborts), so threads of one
process appending to one chain would mostly abort each other. A process-wide lock queues
them instead; no other process can open the same database file for writing, so the lock
plus UNIQUE (chain_namespace, seq) covers every writer. The lock is held only for the few
statements of one store, which never wait on anything.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import duckdb

from ..bundle import MemoryBundle
from ..errors import ReceiptError
from ..receipts import RECEIPT_VERSION, inputs_json, seal_fragments
from ..records import Candidate
from ..timefmt import as_utc
from .cursors import cursor

_RETRIES = 200
_RETRYABLE = (duckdb.TransactionException, duckdb.ConstraintException)
_APPEND_LOCK = threading.Lock()


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
    try:
        for attempt in range(_RETRIES):
            created = as_utc(now).replace(tzinfo=UTC) if now is not None else datetime.now(UTC)
            try:
                with _APPEND_LOCK:
                    return _store_once(cur, bundle, body, inputs, chain, session_id, query,
                                       created)
            except _RETRYABLE as exc:
                _rollback(cur)
                conflict = exc
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


def _store_once(cur, bundle: MemoryBundle, body: dict[str, str], inputs: str, chain: str,
                session_id: str | None, query: dict[str, Any] | None,
                created: datetime) -> Stored:
    bundle_id, receipt_id = str(uuid.uuid4()), str(uuid.uuid4())
    cur.execute("BEGIN TRANSACTION")
    last, prev = cur.execute(
        "SELECT max(seq), arg_max(receipt_sha256, seq) FROM rms_receipts "
        "WHERE chain_namespace = ?", [chain]).fetchall()[0]
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
    cur.execute("COMMIT")
    return Stored(bundle_id, receipt_id, digest, seq)


def _rollback(cur) -> None:
    try:
        cur.execute("ROLLBACK")
    except duckdb.Error:
        pass

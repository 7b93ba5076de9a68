"""replay(): re-pack a stored receipt's recorded candidates and compare the bytes.

The bundle row keeps the validated candidates (`inputs`) and the receipt keeps their
sha256, the budget and the full config, so a replay needs nothing else. It also reports
which candidates' nodes have changed since (their rms_nodes.content no longer hashes to
the content_sha256 the receipt recorded): re-running the ranking query would not give
the same bundle, even though the recorded inputs still do. Only rms_nodes is tracked: the
other tables a ranking query read are listed in untracked_tables, so a caller is told
plainly where edits would go unnoticed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from ..bundle import MemoryBundle
from ..duck.cursors import audit_cursor, check_connection, explains_setup
from ..errors import ReceiptError
from ..packing.repack import (
    check_canonical,
    check_receipt_body,
    compare_with_receipt,
    parse_receipt,
    repack,
)
from ..receipts import sha256_text
from .ids import resolve_receipt_id


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplayResult:
    """The outcome of one replay; `identical` is the promise that matters."""

    receipt_id: str
    bundle_id: str
    recorded_sha256: str | None  # None when an edited receipt lost its context_sha256
    replayed_sha256: str
    same_decisions: bool
    changed_nodes: tuple[str, ...]
    missing_nodes: tuple[str, ...]
    encoding_changed: bool
    bundle: MemoryBundle
    tables_read: tuple[str, ...] = ()
    untracked_tables: tuple[str, ...] = ()
    # Receipt fields other than the context, decisions and encoding (flags, tokens_used,
    # metrics, conflicts, ...) whose replayed value differs from the recorded one.
    differing_fields: tuple[str, ...] = ()
    stored_sha256: str | None = None  # sha256 of rms_bundles.context as stored now

    @property
    def identical(self) -> bool:
        """True when the re-packed context has exactly the recorded bytes: those the receipt
        records a digest of, and those the bundle row stores."""
        return (self.replayed_sha256 == self.recorded_sha256
                and self.stored_sha256 in (None, self.replayed_sha256))

    @property
    def reproduced(self) -> bool:
        """Same bytes, same decisions, the same tokenizer and the same receipt fields."""
        return (self.identical and self.same_decisions and not self.encoding_changed
                and not self.differing_fields)

    @property
    def tracking(self) -> str:
        """What changed_nodes covers, in words."""
        if not self.untracked_tables:
            return "changed_nodes covers rms_nodes, the only table this pack read"
        return (f"changed_nodes covers rms_nodes only; edits to {', '.join(self.untracked_tables)} "
                "(read by the ranking query) are not tracked: compare content_sha256 in "
                "rms_receipt_decisions with those rows yourself")


@explains_setup("rms_duck.replay")
def replay(con: duckdb.DuckDBPyConnection, receipt_id: object) -> ReplayResult:
    """Re-pack a receipt's recorded candidates with its budget and config.

    Args:
        con: a connection from rms_duck.connect().
        receipt_id: the receipt id (or its bundle id).

    Returns:
        A ReplayResult: identical bytes or not, plus nodes changed since (changed_nodes)
        and candidate ids with no rms_nodes row (missing_nodes: deleted, or never nodes).

    Raises:
        ReceiptError: unknown id, a malformed or non-canonical receipt, a receipt_version
            this rms_duck cannot replay, a missing bundle, or stored inputs that no longer
            match the receipt's inputs_sha256.
    """
    check_connection(con, "rms_duck.replay")
    cur = audit_cursor(con)
    try:
        rid = resolve_receipt_id(cur, receipt_id)
        text, body, bundle_id, inputs, stored_sha256 = _load(cur, rid)
        candidates = check_receipt_body(body, f"receipt {rid}")
        check_canonical(text, body, f"receipt {rid}")
        recorded = _current_hashes(cur, [c["id"] for c in candidates])
    finally:
        cur.close()
    bundle = repack(inputs, budget=body.get("budget"), config=body.get("config"),
                    receipt_version=body.get("receipt_version"))
    comparison = compare_with_receipt(body, bundle)
    changed = tuple(sorted(c["id"] for c in candidates
                           if c["id"] in recorded and recorded[c["id"]] != c["content_sha256"]))
    missing = tuple(sorted(c["id"] for c in candidates if c["id"] not in recorded))
    tables = tables_of(body.get("query"))
    return ReplayResult(
        tables_read=tables,
        untracked_tables=tuple(t for t in tables if t.split(".")[-1] not in TRACKED_TABLES),
        receipt_id=rid, bundle_id=bundle_id, recorded_sha256=body.get("context_sha256"),
        replayed_sha256=bundle.context_sha256,
        same_decisions=comparison.same_decisions,
        changed_nodes=changed, missing_nodes=missing,
        encoding_changed=comparison.encoding_changed,
        bundle=bundle, stored_sha256=stored_sha256,
        differing_fields=comparison.differing_fields)


TRACKED_TABLES = frozenset({"rms_nodes"})


def tables_of(query: Any) -> tuple[str, ...]:
    """The tables a receipt's ranking query read (parsed again for receipts that predate
    the recorded list); () for packs from Arrow input, which read no table."""
    if not isinstance(query, dict):
        return ()
    if isinstance(query.get("tables"), list):
        return tuple(str(t) for t in query["tables"])
    if not isinstance(query.get("sql"), str):
        return ()
    import sqlglot

    from ..duck.query import tables_read
    try:
        return tables_read(sqlglot.parse_one(query["sql"], read="duckdb"))
    except sqlglot.errors.SqlglotError:
        return ()


def _load(cur: duckdb.DuckDBPyConnection,
          rid: str) -> tuple[str, dict[str, Any], str, str, str | None]:
    receipt, bundle_id, inputs, context = cur.execute(
        "SELECT r.receipt, CAST(r.bundle_id AS VARCHAR), CAST(b.inputs AS VARCHAR), "
        "b.context FROM rms_receipts AS r LEFT JOIN rms_bundles AS b "
        "ON b.bundle_id = r.bundle_id WHERE r.receipt_id = ?", [rid]).fetchall()[0]
    body = parse_receipt(receipt, f"receipt {rid!r}")
    if inputs is None:
        raise ReceiptError(
            f"receipt {rid!r} has no bundle: bundle_id {bundle_id!r} is not in rms_bundles, so "
            "its inputs are gone; restore the bundle row from a backup")
    if sha256_text(inputs) != body.get("inputs_sha256"):
        raise ReceiptError(
            f"stored inputs of bundle {bundle_id!r} hash to {sha256_text(inputs)!r} but the "
            f"receipt records inputs_sha256 {body.get('inputs_sha256')!r}; the inputs were "
            "edited, so a replay would prove nothing: restore the bundle row from a backup")
    return (receipt, body, bundle_id, inputs,
            None if context is None else sha256_text(context))


def _current_hashes(cur: duckdb.DuckDBPyConnection,
                    ids: list[Any]) -> dict[str, str | None]:
    """sha256 of the current rms_nodes.content for each candidate id that is a node.

    Hashed here, not with SQL's sha256(): a macro stored in the file under that name runs
    in the built-in's place, and could give an edited node its old digest."""
    rows = cur.execute(
        "SELECT CAST(id AS VARCHAR), content FROM rms_nodes "
        "WHERE CAST(id AS VARCHAR) IN (SELECT unnest(CAST(? AS VARCHAR[])))",
        [[str(i) for i in ids]]).fetchall()
    # A NULL content (its NOT NULL dropped by an edit) has no digest, so it is changed.
    return {node_id: None if content is None else sha256_text(content)
            for node_id, content in rows}


"""Chain anchors: the newest receipt of every chain, saved outside the database.

A hash chain proves that nothing inside it changed, but a writer can delete or re-hash its
newest receipts, or recompute it from any point on, and it still links. Whoever keeps the
heads exported earlier catches that: each saved head must still be at its seq with the
same sha256, and verification already proves everything before it links up to it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

import duckdb

from ..config import check_flag
from ..duck.cursors import audit_cursor, check_connection, explains_setup
from ..errors import ReceiptError
from ..receipts import sha256_text

HEADS_FORMAT = "rms_duck.chain_heads"
HEADS_VERSION = 1


@explains_setup("rms_duck.export_heads")
def export_heads(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The head of every chain: {"format", "version", "chains": [{chain_namespace, seq,
    receipt_id, receipt_sha256}]}, sorted by chain. The digest is computed here from the
    receipt text, not read from the receipt_sha256 column. Reads only.
    """
    check_connection(con, "rms_duck.export_heads")
    cur = audit_cursor(con)
    try:
        rows = cur.execute(
            "SELECT chain_namespace, seq, CAST(receipt_id AS VARCHAR), receipt "
            "FROM rms_receipts QUALIFY row_number() OVER "
            "(PARTITION BY chain_namespace ORDER BY seq DESC) = 1 ORDER BY chain_namespace"
        ).fetchall()
    finally:
        cur.close()
    chains = [{"chain_namespace": ns, "seq": seq, "receipt_id": rid,
               "receipt_sha256": sha256_text(text)} for ns, seq, rid, text in rows]
    return {"format": HEADS_FORMAT, "version": HEADS_VERSION, "chains": chains}


def write_heads(con: duckdb.DuckDBPyConnection, path: str | os.PathLike[str], *,
                verify_first: bool = True) -> dict[str, Any]:
    """Export the heads to a JSON file (keep it somewhere the database's writers cannot).

    Heads anchor the chains as they are now, so by default the database is verified first
    and nothing is written when it fails, as `rms-duck audit --export-heads` does; pass
    verify_first=False when it was just verified."""
    check_connection(con, "rms_duck.write_heads")
    check_flag("verify_first", verify_first, "pass verify_first=False to write the heads "
               "without verifying first")
    if verify_first:
        from .verify import verify_receipts

        problems = verify_receipts(con)
        if problems:
            raise ReceiptError(
                f"heads not written to {os.fspath(path)!r}: the database does not verify "
                f"({len(problems)} problem(s), the first: {problems[0]}); saved heads would "
                "anchor the chains as they are: investigate with `rms-duck audit`, or pass "
                "verify_first=False to save them anyway")
    heads = export_heads(con)
    try:
        with open(path, "w", encoding="utf-8") as out:
            json.dump(heads, out, indent=2, sort_keys=True)
            out.write("\n")
    except OSError as exc:
        raise ReceiptError(f"cannot write heads file {os.fspath(path)!r}: {exc.strerror}; "
                           "pass a path in a folder you can write to") from None
    return heads


def read_heads(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Load a heads file written by write_heads(); ReceiptError names what is wrong."""
    try:
        with open(path, encoding="utf-8") as src:
            heads = json.load(src)
    except OSError as exc:
        raise ReceiptError(f"cannot read heads file {os.fspath(path)!r}: {exc.strerror}; "
                           "pass a file written by `rms-duck audit --export-heads`") from None
    except (ValueError, RecursionError) as exc:  # RecursionError: nested past json's limit
        raise ReceiptError(f"heads file {os.fspath(path)!r} is not JSON ({exc}); pass a file "
                           "written by `rms-duck audit --export-heads`") from None
    _check_format(heads, os.fspath(path))
    return heads


def check_heads(cur: duckdb.DuckDBPyConnection, heads: Mapping[str, Any]):
    """HEAD_MISSING / HEAD_MISMATCH problems for saved heads the database no longer has."""
    from .verify import ReceiptProblem

    if isinstance(heads, (str, os.PathLike)):
        # A path was told "pass a file written by `rms-duck audit --export-heads`": the
        # caller had passed one, where the argument takes what read_heads returns.
        raise ReceiptError(
            f"heads must be the dict rms_duck.read_heads(path) returns, got the path "
            f"{os.fspath(heads)!r}; pass heads=rms_duck.read_heads({os.fspath(heads)!r})")
    _check_format(heads, "heads")
    problems = []
    for head in heads["chains"]:
        ns, seq, saved = head["chain_namespace"], head["seq"], head["receipt_sha256"]
        rows = cur.execute(
            "SELECT receipt, CAST(receipt_id AS VARCHAR), CAST(bundle_id AS VARCHAR) "
            "FROM rms_receipts WHERE chain_namespace = ? AND seq = ?", [ns, seq]).fetchall()
        if not rows:
            newest = cur.execute("SELECT max(seq) FROM rms_receipts WHERE chain_namespace = ?",
                                 [ns]).fetchall()[0][0]
            problems.append(ReceiptProblem(
                problem="HEAD_MISSING", chain_namespace=ns, seq=seq,
                receipt_id=head.get("receipt_id"), bundle_id=None, detail=(
                    f"the saved head of chain {ns!r} is seq {seq}, but the chain now "
                    + (f"ends at seq {newest}" if newest is not None else "has no receipts")
                    + ": its newest receipts were deleted; restore them from a backup")))
            continue
        text, rid, bid = rows[0]
        actual = sha256_text(text)
        if actual != saved:
            problems.append(ReceiptProblem(
                problem="HEAD_MISMATCH", chain_namespace=ns, seq=seq, receipt_id=rid,
                bundle_id=bid, detail=(
                    f"the saved head of chain {ns!r} at seq {seq} has sha256 {saved}, but the "
                    f"receipt there now hashes to {actual}: the chain was rewritten up to "
                    "(at least) this receipt; restore it from a backup")))
    return problems


_MAX_SEQ = 2**63 - 1


def _text(value: object) -> bool:
    """A str DuckDB can take as a parameter: no lone surrogate (JSON's "\\ud800")."""
    if not isinstance(value, str):
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_format(heads: object, where: str) -> None:
    ok = (isinstance(heads, Mapping) and heads.get("format") == HEADS_FORMAT
          and heads.get("version") == HEADS_VERSION and isinstance(heads.get("chains"), list))
    bad = None
    if ok:
        assert isinstance(heads, Mapping)
        bad = next((i for i, h in enumerate(heads["chains"]) if not _head_ok(h)), None)
    if not ok or bad is not None:
        entry = "" if bad is None else (
            f": chains[{bad}] is {str(heads['chains'][bad])[:80]!r}, not a chain_namespace "  # type: ignore[index]
            f"(text), seq (1..{_MAX_SEQ:,}) and receipt_sha256 (text)")
        raise ReceiptError(
            f"{where} is not an rms_duck heads file (format {HEADS_FORMAT!r} version "
            f"{HEADS_VERSION} with a list of chains){entry}; pass a file written by "
            "`rms-duck audit --export-heads` or the dict rms_duck.export_heads(con) returns")


def _head_ok(head: object) -> bool:
    return (isinstance(head, Mapping) and _text(head.get("chain_namespace"))
            and type(head.get("seq")) is int  # not True, which json reads as a bool
            and 1 <= head["seq"] <= _MAX_SEQ  # rms_receipts.seq is a BIGINT
            and _text(head.get("receipt_sha256")))

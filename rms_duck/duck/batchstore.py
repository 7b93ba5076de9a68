"""Store bundles packed elsewhere (pack_batches, Dask, Spark, Ray) in one DuckDB store.

Packing distributes; the receipt chain does not: each receipt names its predecessor's
digest, so appends to one chain are sequential (storage.py). store_batches() therefore
runs in one process after the workers are done. It sorts the rows by their group key, so
the same packed table always gives the same chain order, and appends them in batches,
one transaction each: the chain tips are read once per batch and the receipts sealed in
Python, instead of a transaction per bundle.
"""

from __future__ import annotations

import itertools
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from ..config import check_flag
from ..errors import ConfigError, ReceiptError, RmsError, did_you_mean
from ..escape import canonical_json
from ..packing.arrowtype import BUNDLE_FIELDS, INPUTS_COLUMN
from ..packing.batches import as_table
from ..receipts import RECEIPT_VERSION, SEALED_FIELDS, join_fragments, receipt_template, sha256_text
from .cursors import check_connection, cursor, explains_setup
from .storage import BATCH_ROWS, Pending, append_pending
from .surrogates import config_surrogate_error

_NEEDED = ("context", "tokens_used", "context_budget", "included", "excluded", "flags",
           "context_sha256", "receipt", "inputs")


@explains_setup("rms_duck.store_batches")
def store_batches(con: duckdb.DuckDBPyConnection, table: Any, *,
                  by: str | Sequence[str] | None = None, namespace: str | None = None,
                  session_id: str | None = None, skip_stored: bool = False) -> pa.Table:
    """Append packed bundles and their receipts to the store, in group-key order.

    Args:
        con: a writable connection prepared by rms_duck.connect().
        table: the output of pack_batches(..., inputs=True) or of rms_duck.dask.pack_groups
            (Arrow, pandas, or any __arrow_c_stream__ source).
        by: the key column(s) that order the chain (default: every column that is not a
            bundle field).
        namespace: the receipt chain to extend (default: each bundle's candidates' shared
            namespace, else '').
        session_id: recorded on every bundle and receipt.
        skip_stored: leave out each row whose bundle the store already holds (the same
            chain, context, inputs and receipt body: config, budget, decisions), once per
            stored copy: running the table again after an interrupted run stores only what
            that run did not.

    Returns:
        One row per bundle stored by this call, in chain order: the key column(s),
        bundle_id, receipt_id, chain_namespace and seq.

    Raises:
        ConfigError: a needed column is missing. ReceiptError: a row's receipt does not
        match its context; nothing is stored (every row is checked before any is written).
    """
    check_connection(con, "rms_duck.store_batches")
    check_flag("skip_stored", skip_stored,
               "pass skip_stored=True to leave out bundles the store already holds")
    # As rms_duck.pack refuses them: a number namespace failed in Arrow ("Expected bytes, got
    # a 'int' object"), and a number session_id was sealed into the receipt as a JSON number.
    for name, value in (("namespace", namespace), ("session_id", session_id)):
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{name} must be text (or None), got {type(value).__name__} "
                              f"{value!r}; pass str({name})")
    if by is not None and not isinstance(by, str) and isinstance(by, Iterable):
        by = list(by)  # any iterable of names (a DataFrame's columns), read once
    if by is not None and (isinstance(by, str) and not by or not isinstance(by, str) and (
            not isinstance(by, list) or not all(isinstance(k, str) and k for k in by))):
        raise ConfigError(f"by must name the key column(s) pack_batches grouped by, got {by!r}; "
                          "for example by='q' or by=['session_id', 'turn'], or leave it out "
                          "to use them all")
    data = as_table(table)
    missing = [name for name in _NEEDED if name not in data.column_names]
    if missing:
        fix = ("pack with inputs=True" if missing == ["inputs"]
               else "pass the table pack_batches() or pack_groups() returned")
        raise ConfigError(f"store_batches needs column {missing[0]!r}, which the table "
                          f"lacks; {fix}")
    keys = _keys(data, by)
    order = pc.sort_indices(data, sort_keys=[(k, "ascending", "at_end") for k in keys]
                            + [("context_sha256", "ascending", "at_end")])
    data = data.take(order)
    columns = list(_NEEDED) + [k for k in keys if k not in _NEEDED]
    batches = [data.slice(start, BATCH_ROWS).select(columns).to_pylist
               for start in range(0, len(data), BATCH_ROWS)]
    # Every row is checked before any batch is written: a bad row in a later batch used to
    # leave the earlier batches stored, and the run that followed the fix stored them twice.
    # Only the first batch is kept prepared; memory holds one batch, not the whole table.
    def prepared(batch: Callable[[], list[dict[str, Any]]]) -> list[Pending]:
        return [_prepared(row, keys, namespace, session_id, matched=skip_stored)
                for row in batch()]

    try:
        first = prepared(batches[0]) if batches else []
        for batch in batches[1:]:
            for row in batch():
                _checked(row, keys)
    except RmsError as exc:
        raise type(exc)(f"{exc} (nothing was stored)") from exc.__cause__
    stored = []
    kept: list[bool] = []
    # Each row this call has passed stands for one copy in the store: the one it matched,
    # or the one it stored. The store's copies less these are what later rows may match.
    passed: Counter[tuple[str, str, str, str]] = Counter()
    found: list[bool] = []  # of the batch being appended: which rows the store holds

    def already_stored(cur: Any, rows: Sequence[Pending]) -> list[bool]:
        # Asked inside the append's transaction, under its lock (append_pending): asked
        # before it, two threads storing one table both found nothing and both stored it.
        copies = _held(cur, rows) - passed
        found[:] = [_take(copies, row) for row in rows]
        return found

    cur = cursor(con)
    try:
        for rows in itertools.chain([first], map(prepared, batches[1:])):
            found.clear()
            stored.extend(append_pending(cur, rows,
                                         held=already_stored if skip_stored else None))
            if skip_stored:
                kept.extend(not skipped for skipped in found)
                passed.update(map(_key, rows))
            else:
                kept.extend(True for _ in rows)
    finally:
        cur.close()
    result = data.select(list(keys))
    if not all(kept):
        result = result.filter(pa.array(kept, pa.bool_()))
    for name, kind in (("bundle_id", pa.string()), ("receipt_id", pa.string()),
                       ("chain_namespace", pa.string()), ("seq", pa.int64())):
        result = result.append_column(name, pa.array([getattr(s, name) for s in stored], kind))
    return result


def _held(cur, rows: Sequence[Pending]) -> Counter[tuple[str, str, str, str]]:
    """(chain, context_sha256, inputs digest, receipt body digest) of each stored bundle that
    shares a context with one of `rows`, counted. The body (config, budget, available,
    decisions, ...) is part of the key: another config can give the same context from the
    same inputs, and its receipt is not the stored one."""
    digests = sorted({row.context_sha256 for row in rows})
    found = cur.execute("SELECT b.namespace_id, b.context_sha256, b.inputs, r.receipt "
                        "FROM rms_bundles AS b JOIN rms_receipts AS r USING (bundle_id) "
                        "WHERE list_contains(?, b.context_sha256)", [digests]).fetchall()
    return Counter((chain, digest, sha256_text(inputs or ""), _stored_body_sha256(receipt))
                   for chain, digest, inputs, receipt in found)


def _stored_body_sha256(receipt: str | None) -> str:
    """sha256 of a stored receipt's body, the fields storage did not seal in ('' when the
    receipt is not a JSON object: no row's body matches it)."""
    try:
        body = json.loads(receipt or "")
    except ValueError:
        return ""
    if not isinstance(body, dict):
        return ""
    return _body_sha256({key: canonical_json(value) for key, value in body.items()})


def _body_sha256(fragments: Mapping[str, str]) -> str:
    """The digest of what a receipt body records of its pack; receipt_version and the
    candidates' has_content (version 7 added it) are left out, so a bundle a previous
    release stored is the same bundle packed again now."""
    kept = {key: text for key, text in fragments.items() if key not in _NOT_COMPARED}
    if "candidates" in kept:
        kept["candidates"] = _HAS_CONTENT.sub("", kept["candidates"])
    return sha256_text(join_fragments(kept))


_NOT_COMPARED = SEALED_FIELDS | {"receipt_version"}
# In canonical JSON a key's quotes are never escaped, so this matches no text inside a value.
_HAS_CONTENT = re.compile(r'"has_content":(?:true|false|null),')


def _take(held: Counter[tuple[str, str, str, str]], row: Pending) -> bool:
    """Whether the store already holds this row's bundle; one stored copy serves one row."""
    if not held:
        return False
    key = _key(row)
    if held[key] <= 0:
        return False
    held[key] -= 1
    return True


def _key(row: Pending) -> tuple[str, str, str, str]:
    """What _held counts a stored bundle by, for a row about to be stored: (chain,
    context_sha256, inputs digest, receipt body digest), made by _prepared(matched=True)."""
    if row.match_key is None:
        raise AssertionError("store_batches matches only rows prepared with their key")
    return row.match_key


def _keys(data: pa.Table, by: str | Sequence[str] | None) -> list[str]:
    if by is None:
        return [n for n in data.column_names
                if n not in BUNDLE_FIELDS and n != INPUTS_COLUMN]
    keys = [by] if isinstance(by, str) else list(by)
    for key in keys:
        if key not in data.column_names:
            keys_there = [n for n in data.column_names
                          if n not in BUNDLE_FIELDS and n != INPUTS_COLUMN]
            raise ConfigError(
                f"by names column {key!r}, which the table lacks (columns: "
                f"{', '.join(data.column_names)}).{did_you_mean(key, keys_there)} Pass the key "
                f"column(s) pack_batches grouped by ({', '.join(keys_there) or 'none'}), or "
                "leave by out to use them all")
    return keys


def _prepared(row: dict[str, Any], keys: Sequence[str], namespace: str | None,
              session_id: str | None, *, matched: bool) -> Pending:
    """The row with its parsed receipt body and chain, checked against its own context;
    with the key it is matched by (_key) when `matched` (skip_stored)."""
    body, inputs = _checked(row, keys)
    if namespace is not None:
        chain = namespace
    else:
        names = {c.get("namespace_id") for c in inputs}
        chain = (names.pop() or "") if len(names) == 1 else ""
    fragments = {key: canonical_json(value) for key, value in body.items()}
    inputs_sha256 = sha256_text(row["inputs"])
    template = receipt_template(fragments, chain_namespace=chain, inputs_sha256=inputs_sha256,
                                query=None, session_id=session_id)
    return Pending(chain, template, row["inputs"], row["context"], row["context_sha256"],
                   body["config"]["context_format"], row["context_budget"], body["available"],
                   row["tokens_used"], list(row["flags"]), len(row["included"]),
                   len(row["excluded"]), body.get("metrics") or {}, session_id,
                   receipt_version=body["receipt_version"],
                   match_key=(chain, row["context_sha256"], inputs_sha256,
                              _body_sha256(fragments)) if matched else None)


def _checked(row: dict[str, Any], keys: Sequence[str]) -> tuple[dict[str, Any], list[Any]]:
    """The row's parsed receipt body and inputs, once both match the row's own columns."""
    where = ", ".join(f"{k}={row.get(k)!r}" for k in keys) or "a row"
    try:
        body = json.loads(row["receipt"])
    except (TypeError, ValueError):
        raise ReceiptError(f"bundle of {where}: its receipt is not JSON; store the table "
                           "pack_batches() returned, unmodified") from None
    if not isinstance(body, dict):
        raise ReceiptError(f"bundle of {where}: its receipt must be a JSON object, got "
                           f"{str(row['receipt'])[:60]!r}; store the table pack_batches() "
                           "returned, unmodified")
    # The fields storage reads besides those checked against the row's columns below.
    config, available, metrics = body.get("config"), body.get("available"), body.get("metrics")
    wrong: tuple[str, object] | None = None
    if not isinstance(config, dict) or not isinstance(config.get("context_format"), str):
        wrong = ("'config' must be an object with a context_format", config)
    elif type(available) is not int:
        wrong = ("'available' must be a whole number", available)
    elif metrics is not None and not isinstance(metrics, dict):
        wrong = ("'metrics' must be an object", metrics)
    if wrong is not None:
        raise ReceiptError(f"bundle of {where}: its receipt's field {wrong[0]}, got "
                           f"{str(wrong[1])[:60]!r}; store the table pack_batches() returned, "
                           "unmodified")
    digest = sha256_text(row["context"] or "")
    if not (digest == row["context_sha256"] == body.get("context_sha256")
            and row["tokens_used"] == body.get("tokens_used")
            and row["context_budget"] == body.get("budget")
            and list(row["flags"] or ()) == body.get("flags")
            and _counts(row) == _counts_recorded(body)):
        raise ReceiptError(f"bundle of {where}: its columns (context, context_sha256, "
                           "tokens_used, context_budget, flags, included, excluded) and its "
                           "receipt disagree; re-pack it rather than storing edited rows")
    try:
        inputs = json.loads(row["inputs"])
        given = sorted((c["id"], c["score"], sha256_text(c["content"])) for c in inputs)
    except (TypeError, ValueError, KeyError):
        given = None
    # The receipt lists every candidate (duplicates too) with its id, score and content
    # digest: inputs from another row, or edited, would be sealed yet never replay.
    if given != sorted((c.get("id"), c.get("score"), c.get("content_sha256"))
                       for c in body.get("candidates") or ()):
        raise ReceiptError(f"bundle of {where}: its inputs are not the candidates its receipt "
                           "records; store the table pack_batches() returned, unmodified")
    version = body.get("receipt_version")
    if type(version) is not int or not 1 <= version <= RECEIPT_VERSION:
        raise ReceiptError(f"bundle of {where}: its receipt's receipt_version is {version!r}, "
                           f"but this rms_duck stores versions 1 to {RECEIPT_VERSION} (the "
                           "versions it can replay); store the table with the rms_duck that "
                           "packed it, or re-pack it with this one")
    refused = config_surrogate_error(body.get("config") or {})
    if refused is not None:
        raise ConfigError(f"bundle of {where}: {refused}") from None
    return body, inputs


def _counts(row: dict[str, Any]) -> tuple[int, int]:
    return len(row["included"] or ()), len(row["excluded"] or ())


def _counts_recorded(body: dict[str, Any]) -> tuple[int, int]:
    decisions = [c.get("decision") for c in body.get("candidates") or ()]
    return decisions.count("included"), decisions.count("excluded")

"""Receipts: canonical, deterministic JSON that explains every decision of one pack.

The body holds no clock reading or id, so the same inputs always give the same bytes.
Storage (duck/storage.py) adds the chain fields: receipt_template() writes the stored text
but the five values only the append knows, and seal_template() joins them and returns the
text and its sha256. RECEIPT_FIELDS and CANDIDATE_FIELDS document the format; the
tests hold stored receipts and docs/audits.md to exactly these names.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, fields
from datetime import UTC, datetime
from enum import Enum
from operator import attrgetter
from typing import Any

from .config import PackingConfig
from .escape import canonical_json, harden, json_string
from .records import TEXT_LEVELS, Candidate, Decision
from .sha import sha256_text

# 2: candidates carry source_type and epistemic, and reader and compact contexts use the
# issue-11 bytes (date lines, conflict pair labels). 3: the reader states a year line and
# '28 May' day lines instead of '2023-05-28'. 4: conflict lines priced with their pair
# labels. 5: the reader's shorter header and metadata line, and time lines only under a day
# whose records differ in time. 6: reader record lines without the leading "- ", '#' section
# and metadata headings, a shorter header; compact without a namespace column, with a speaker
# one. 7: the section 7 ladder downgrades placed pins and tasks before it drops a pin, a
# record in a conflict pair never folds, a counterpart below min_score marks the conflict,
# adjacent windows gather only where they fit, a reader speaker with a modifier letter
# that looks like ':' or '"' is quoted, and candidates carry has_content. 8: the reader
# names a speaker once for a run of its records, on a speaker line. Older receipts
# replay with the frozen formats and packing of their version (formats/legacy.py,
# packing/compat.py), and their candidates without has_content.
RECEIPT_VERSION = 9

# Every key of a stored receipt (receipt_version 9). The first group is the body that
# pack_candidates() builds; the second is added when the receipt is stored.
RECEIPT_FIELDS: dict[str, str] = {
    "receipt_version": "format version of the receipt (7; 6 before the section 7 ladder "
                       "downgraded placed pins and tasks before dropping a pin, records in "
                       "a conflict pair stopped folding, a counterpart below min_score "
                       "marked its conflict, adjacent session windows were gathered only "
                       "where they fit, a reader speaker with a modifier letter that "
                       "looks like ':' or '\"' was quoted, and candidates carried "
                       "has_content, "
                       "5 before the reader's record "
                       "lines lost their leading '- ' and its section and metadata lines "
                       "became '#' headings and compact traded its namespace column for a "
                       "speaker one, 4 before the reader's shorter "
                       "header and metadata line and its time lines only where a day's "
                       "records differ in time, 3 before conflict lines were "
                       "priced with their pair labels, 2 before the reader's year lines, 1 "
                       "before source_type, epistemic and the issue-11 reader and compact "
                       "bytes)",
    "encoding": "{name, sha256}: the tokenizer and the sha256 of its BPE ranks",
    "config": "every PackingConfig field, defaults included, but min_score only when set "
              "(a receipt without it packed with 0.0)",
    "budget": "context budget in tokens, overhead included",
    "available": "budget minus overhead_tokens",
    "tokens_used": "exact tokens of the rendered context",
    "context_sha256": "sha256 of the context's UTF-8 bytes",
    "flags": "BUDGET_ERROR, BUDGET_OVERFLOW, GUIDANCE_OMITTED",
    "conflicts": "packed CONTRADICTS pairs, as sorted id pairs",
    "guidance_shown": "whether the context guidance line was rendered",
    "metrics": "str_mean, str_p10, budget_efficiency, budget_waste (RFC-0006 section 8)",
    "candidates": "one entry per candidate, sorted by id (CANDIDATE_FIELDS)",
    "receipt_id": "UUID of this receipt",
    "bundle_id": "UUID of the rms_bundles row it explains",
    "created_at": "ISO-8601 time in UTC (+00:00)",
    "chain_namespace": "the hash chain it belongs to (a namespace)",
    "seq": "position in the chain, 1, 2, 3, ... without gaps",
    "prev_sha256": "receipt_sha256 of the previous receipt in the chain (null for seq 1)",
    "inputs_sha256": "sha256 of the bundle's stored inputs (the validated candidates)",
    "query": "{sql, fingerprint, dialect, sqlglot_version, tables} of the ranking query "
             "(tables: the ones it read), or null",
    "session_id": "the caller's session id, or null",
}
# The fields storage adds when the receipt is stored (the second group above): those
# receipt_template() writes where the bundle is packed, and APPEND_FIELDS.
SEALED_FIELDS = frozenset({"receipt_id", "bundle_id", "created_at", "chain_namespace", "seq",
                           "prev_sha256", "inputs_sha256", "query", "session_id"})
CANDIDATE_FIELDS: dict[str, str] = {
    "id": "node id",
    "score": "composite score in [0, 1]",
    "content_sha256": "sha256 of the candidate's content",
    "tier": "RFC section 5 priority tier, 1 (pins and tasks) to 4 (remaining)",
    "order_key": "sort key inside the tier (\"head\": reserved first by balanced ordering)",
    "tried": "representations tried, highest fidelity first",
    "chosen": "representation packed, or null",
    "tokens": "exact tokens of the record's line (0 when excluded)",
    "decision": "included or excluded",
    "reason": "coded reason for an exclusion (BUDGET_EXHAUSTED, DUPLICATE, ...), or null",
    "position": "0-based line order in the context, or null",
    "source_type": "the node's stored source_type (user_stated, tool_output, ...)",
    "epistemic": "the node's epistemic status (asserted, inferred, ...)",
    "has_content": "whether the record is packed showing memory text: non-blank content at "
                   "full, prose or structured (receipt_version 7 on; false when excluded)",
}
# The representations whose line shows the stored memory text (records.TEXT_LEVELS): a
# packed record's has_content is its chosen level among these and its content not blank.
TEXT_LEVEL_NAMES = frozenset(level.value for level in TEXT_LEVELS)


def has_content(chosen: str | None, has_text: bool | None) -> bool:
    """A receipt candidate's has_content: packed (`chosen`, the level's name) at a text level
    with non-blank content (`has_text`, Candidate.has_text; packing/represent.py
    has_memory_text)."""
    return chosen in TEXT_LEVEL_NAMES and bool(has_text)


def candidate_to_dict(c: Candidate) -> dict[str, Any]:
    """A JSON-ready form of a candidate that to_candidate() reads back to an equal value.

    Fields at their default (same type, equal value) are left out, as to_candidate() fills
    them in again: stored inputs were about 70% defaults (a 1,000-candidate pack stored
    728 KB of them, now 318 KB). id, score and content are always written.
    """
    out: dict[str, Any] = {}
    for name in c.__slots__:
        value = getattr(c, name)
        if _is_default(name, value):
            continue
        if isinstance(value, Enum):
            value = value.value
        elif isinstance(value, datetime):
            value = value.isoformat()
        elif isinstance(value, tuple):
            value = list(value)
        out[name] = value
    return out


def decision_to_dict(d: Decision) -> dict[str, Any]:
    key = d.order_key
    out = {
        "id": d.id, "score": d.score, "content_sha256": d.content_sha256, "tier": d.tier,
        "order_key": "head" if key is not None and math.isinf(key) else key,
        "tried": list(d.tried), "chosen": d.chosen, "tokens": d.tokens,
        "decision": d.decision, "reason": d.reason, "position": d.position,
        "source_type": d.source_type, "epistemic": d.epistemic,
    }
    if d.has_content is not None:  # None: a replayed receipt of version 6 or earlier
        out["has_content"] = d.has_content
    return out


def receipt_body(*, config: PackingConfig, encoding_sha256: str, budget: int, available: int,
                 tokens_used: int, context_sha256: str, flags: Sequence[str],
                 conflicts: Sequence[Sequence[str]], metrics: Mapping[str, float | None],
                 decisions: Sequence[Decision], guidance_shown: bool) -> dict[str, Any]:
    """The receipt of a finished pack, before storage adds the chain fields."""
    body = _scalar_fields(config=config, encoding_sha256=encoding_sha256, budget=budget,
                          available=available, tokens_used=tokens_used,
                          context_sha256=context_sha256, flags=flags, conflicts=conflicts,
                          metrics=metrics, guidance_shown=guidance_shown)
    body["config"] = config.to_dict()
    body["candidates"] = [decision_to_dict(d) for d in decisions]
    return body


def _scalar_fields(*, config: PackingConfig, encoding_sha256: str, budget: int,
                   available: int, tokens_used: int, context_sha256: str,
                   flags: Sequence[str], conflicts: Sequence[Sequence[str]],
                   metrics: Mapping[str, float | None], guidance_shown: bool) -> dict[str, Any]:
    """Every body field but config and candidates: the part both receipt paths share."""
    return {
        "receipt_version": RECEIPT_VERSION,
        "encoding": {"name": config.encoding, "sha256": encoding_sha256},
        "budget": budget,
        "available": available,
        "tokens_used": tokens_used,
        "context_sha256": context_sha256,
        "flags": list(flags),
        "conflicts": [list(pair) for pair in conflicts],
        "guidance_shown": guidance_shown,
        "metrics": dict(metrics),
    }


def receipt_fragments(*, config: PackingConfig, encoding_sha256: str, budget: int,
                      available: int, tokens_used: int, context_sha256: str,
                      flags: Sequence[str], conflicts: Sequence[Sequence[str]],
                      metrics: Mapping[str, float | None], trace: Sequence[tuple],
                      guidance_shown: bool, with_has_content: bool = True) -> dict[str, str]:
    """The receipt body as {key: canonical JSON of its value}. Joined (join_fragments) it is
    canonical_json(receipt_body(...)) byte for byte, but the candidate rows are written
    straight from the frozen trace, in one pass, and storage adds the chain fields without
    serialising the candidates again. Without has_content (with_has_content False) the
    candidate rows are those of receipt version 6 and earlier, for their replay."""
    body = _scalar_fields(config=config, encoding_sha256=encoding_sha256, budget=budget,
                          available=available, tokens_used=tokens_used,
                          context_sha256=context_sha256, flags=flags, conflicts=conflicts,
                          metrics=metrics, guidance_shown=guidance_shown)
    del body["encoding"]  # written directly below: json.dumps of it cost as much as the rest
    out = {key: canonical_json(value) for key, value in body.items()}
    out["encoding"] = (f'{{"name":{canonical_json(config.encoding)},'
                       f'"sha256":{canonical_json(encoding_sha256)}}}')
    out["config"] = _config_json(config)
    out["candidates"] = candidates_json(trace, with_has_content)
    return out


def _config_json(config: PackingConfig) -> str:
    """canonical_json(config.to_dict()), once per config object: the bundles of one GROUP BY
    share their parsed config. Keyed by identity, as equal configs may print differently
    (-0.0 == 0.0)."""
    got = _CONFIG_TEXTS.get(id(config))
    if got is None or got[0] is not config:
        got = (config, canonical_json(config.to_dict()))
        _remember(_CONFIG_TEXTS, id(config), got, 64)
    return got[1]


_CONFIG_TEXTS: dict[int, tuple[PackingConfig, str]] = {}


def candidates_json(trace: Sequence[tuple], with_has_content: bool = True) -> str:
    """canonical_json([decision_to_dict(d) for d in decisions]) written out directly: keys
    in sorted order, strings through json's own escaper, numbers as json prints them (a
    score is a finite float; an order_key a float, None or the head). Without has_content
    (with_has_content False), the rows of receipt version 6 and earlier."""
    rows = []
    remembered = _DECISION_TEXTS if with_has_content else _DECISION_TEXTS_V6
    # The has_content member as written for an excluded row, for a packed one without
    # memory text and for one with it; nothing at all in a version 6 row.
    absent, blank, shown = _HAS_CONTENT if with_has_content else ("", "", "")
    text_levels = TEXT_LEVEL_NAMES
    isinf = math.isinf
    for (cid, score, content, source_type, epistemic, has_text, tier, key, tried, chosen,
         tokens, reason, position) in trace:  # bundle.TraceRow
        # The row is remembered without its two floats (score, order_key), which a new
        # ranking changes, by everything else it shows (keep this key in step with _ROW's
        # fields) plus the floats' kinds: their types (1 == 1.0 prints apart) and the head.
        # has_content follows from chosen and content, and each kind of row has its own memo.
        kind = None if key is None else _HEAD_KEY if isinf(key) else type(key)
        memo = (cid, content, type(score), epistemic, source_type, tier, kind, tried, chosen,
                tokens, reason, position)
        entry = remembered.get(memo)
        # Equal floats of one type print alike but for a zero (-0.0 == 0.0): only floats
        # without one are kept with the text, and only they can match it.
        plain = bool(score) and (kind is None or kind is _HEAD_KEY or key != 0)
        if plain and entry is not None and entry[1] == score and entry[2] == key:
            rows.append(entry[3])  # the floats the text was last written with
            continue
        if entry is None:
            head = _ROW_HEAD % (
                "null" if chosen is None else f'"{chosen}"', _content_sha256(content),
                "excluded" if chosen is None else "included", epistemic,
                # has_content(chosen, has_text), spelled out: most rows are excluded ones.
                absent if chosen is None else shown if chosen in text_levels and has_text
                else blank,
                json_string(cid))
            middle = _ROW_MIDDLE % ("null" if position is None else int(position),
                                    "null" if reason is None else f'"{reason}"')
            tail = _ROW_TAIL % (source_type, "null" if tier is None else int(tier), tokens,
                                "[" + ",".join(f'"{level}"' for level in tried) + "]")
            parts = (head, middle, tail)
        else:
            parts = entry[0]
        # _number spelled out for floats: a re-ranked pack writes each row's two afresh.
        order = ("null" if kind is None else '"head"' if kind is _HEAD_KEY
                 else float.__repr__(key) if kind is float else _number(key))
        text = (f"{parts[0]}{order}{parts[1]}"
                f"{float.__repr__(score) if type(score) is float else _number(score)}{parts[2]}")
        rows.append(text)
        kept = (parts, score if plain else None, key, text)
        if entry is None:
            if len(content) <= _REMEMBERED_CHARS and len(cid) <= _REMEMBERED_CHARS:
                _remember(remembered, memo, kept, _DECISIONS_LIMIT)
        else:
            remembered[memo] = kept
    return harden("[" + ",".join(rows) + "]")


# key -> (the row's text in three parts around its order_key and score, the score it was
# last written with when plain, else None, that order_key, and that text)
_DECISION_TEXTS: dict[tuple, tuple[tuple[str, str, str], float | None, Any, str]] = {}
_DECISION_TEXTS_V6: dict[tuple, tuple[tuple[str, str, str], float | None, Any, str]] = {}
# Each entry holds its text twice (in parts and whole): half the entries of the digests'.
_DECISIONS_LIMIT = 32_768
_HEAD_KEY = object()  # the kind of an infinite order_key, written "head"
_HAS_CONTENT = ('"has_content":false,', '"has_content":false,', '"has_content":true,')


# The longest text (a candidate's content, a stored row) the memos here keep, or key by: a
# longer one is hashed or written afresh, which costs little beside its own size, where a
# memo of long texts grows by megabytes (200 packs of a distinct 1 MB record kept 520 MB).
_REMEMBERED_CHARS = 4_096


def _remember(memo: dict, key: object, value: object, limit: int) -> None:
    """memo[key] = value, first dropping the oldest tenth when the memo holds `limit` entries
    (dicts keep insertion order), so a long-running process keeps it bounded."""
    if len(memo) >= limit:
        for old in list(memo)[: limit // 10]:
            memo.pop(old, None)
    memo[key] = value


def _content_sha256(text: str) -> str:
    """sha256_text(text), remembered for recently seen texts: agents re-pack the same ones."""
    if len(text) > _REMEMBERED_CHARS:
        return sha256_text(text)
    digest = _DIGESTS.get(text)
    if digest is None:
        digest = sha256_text(text)
        _remember(_DIGESTS, text, digest, _DIGESTS_LIMIT)
    return digest


_DIGESTS: dict[str, str] = {}
_DIGESTS_LIMIT = 65_536

# The fifth %s is the whole has_content member with its comma, or nothing (version 6).
_ROW = ('{"chosen":%s,"content_sha256":"%s","decision":"%s","epistemic":"%s",%s"id":%s,'
        '"order_key":%s,"position":%s,"reason":%s,"score":%s,"source_type":"%s","tier":%s,'
        '"tokens":%d,"tried":%s}')
# _ROW cut where the order_key and the score go.
_ROW_HEAD, _ROW_MIDDLE, _ROW_TAIL = (_ROW.replace('"order_key":%s', '"order_key":\0')
                                     .replace('"score":%s', '"score":\0').split("\0"))


def _number(value: float) -> str:
    # json.dumps prints a float by float.__repr__ (finite values only reach here).
    return repr(value) if type(value) is float else canonical_json(value)


def join_fragments(fragments: Mapping[str, str]) -> str:
    """{key: canonical value text} -> the canonical JSON object (keys sorted, as json sorts)."""
    keys = tuple(fragments)
    order = _KEY_ORDERS.get(keys)
    if order is None:
        # A process's receipts have a few key sets, each met in one order: sort and spell
        # each set once (remembered by the keys in their order), not once per receipt.
        order = tuple((key, json_string(key) + ":") for key in sorted(keys))
        _remember(_KEY_ORDERS, keys, order, 64)
    return "{" + ",".join([name + fragments[key] for key, name in order]) + "}"


_KEY_ORDERS: dict[tuple[str, ...], tuple[tuple[str, str], ...]] = {}


def inputs_json(candidates: Sequence[Candidate]) -> str:
    """Canonical JSON of the candidate inputs, sorted so input order does not matter.

    Each row is written once, straight from the candidate's fields (input_row_json); joining
    the sorted row texts gives the same bytes as canonical_json of the sorted list of
    candidate_to_dict() rows.
    """
    rows = sorted(map(_remembered_row_json, candidates))
    return "[" + ",".join(rows) + "]"


def _remembered_row_json(c: Candidate) -> str:
    """input_row_json(c), remembered for recently stored candidates: agents store packs of
    the same rows again and again, each ranked with scores of its own. So the text is kept
    without its three floats (confidence, salience, score), as the members written before,
    between and after their places in key order, and the floats are written in afresh
    (input_row_json's way: left out at their default, a float by its repr). The key is the
    other fields' values with the types of the other numbers, so values that compare equal
    but print differently (1 and True) never share a text; a row whose times are not in UTC
    (equal instants that print apart) is not remembered."""
    if not (_utc_or_none(c.event_time) and _utc_or_none(c.valid_from)
            and _utc_or_none(c.valid_to)):
        return input_row_json(c)
    key = (_fixed_values(c), tuple(map(type, _fixed_numbers(c))))
    try:
        entry = _ROW_PARTS.get(key)
    except TypeError:  # an unhashable value (a list passed in place of a tuple)
        return input_row_json(c)
    floats = confidence, salience, score = _floats(c)
    if not (abs(confidence) < _INFINITY and abs(salience) < _INFINITY
            and abs(score) < _INFINITY):
        return input_row_json(c)  # json writes Infinity (a hand-built Candidate), not repr
    # Equal floats print alike unless one is a zero (-0.0 == 0.0) or not a float (1 == 1.0):
    # only floats of neither kind are kept with the text, and only they can match it.
    plain = (type(confidence) is float and type(salience) is float and type(score) is float
             and bool(confidence and salience and score))
    if plain and entry is not None and entry[1] == floats:
        return entry[2]  # the floats the text was last written with
    before, between, _, after = parts = entry[0] if entry is not None else _row_parts(c)
    # _is_default and _number spelled out: this runs once per candidate of a stored pack.
    members = [before] if before else []
    if type(confidence) is not float or confidence != _CONFIDENCE_DEFAULT:
        members.append(f'"confidence":{_number(confidence)}')
    members.append(between)  # never empty: id and content are always written
    if type(salience) is not float or salience != _SALIENCE_DEFAULT:
        members.append(f'"salience":{_number(salience)}')
    members.append(f'"score":{_number(score)}')  # nothing sorts between it and salience
    if after:
        members.append(after)
    text = "{" + ",".join(members) + "}"
    kept = (parts, floats if plain else None, text)
    if entry is None:
        if len(text) <= _REMEMBERED_CHARS:  # the text holds every text the key holds
            _remember(_ROW_PARTS, key, kept, _ROW_TEXTS_LIMIT)
    else:
        _ROW_PARTS[key] = kept
    return text


def _row_parts(c: Candidate) -> tuple[str, ...]:
    """input_row_json(c)'s members but the floats' (each run of them comma-joined), split
    where the floats go: before confidence, between it and salience, between salience and
    score, after score."""
    row = _input_row(c)
    runs: list[dict[str, Any]] = [{} for _ in range(len(_FLOAT_KEYS) + 1)]
    for key, value in row.items():
        if key not in _FLOAT_KEYS:
            runs[bisect_left(_FLOAT_KEYS, key)][key] = value
    return tuple(harden(_encode_sorted(run))[1:-1] for run in runs)


def _utc_or_none(value: object) -> bool:
    return value is None or getattr(value, "tzinfo", None) is UTC


# key -> (the text's parts around its floats, the floats it was last written with when
# plain, else None, and that text)
_ROW_PARTS: dict[tuple, tuple[tuple[str, ...], tuple | None, str]] = {}
_ROW_TEXTS_LIMIT = 32_768  # each entry holds its text twice (in parts and whole)


def input_row_json(c: Candidate) -> str:
    """canonical_json(candidate_to_dict(c)), in C: json's encoder already writes an enum
    member (a str) as its value, a tuple as a list and a float by its repr, and the keys go
    in sorted; only the datetimes need their ISO text first."""
    return harden(_encode_sorted(_input_row(c)))


def _input_row(c: Candidate) -> dict[str, Any]:
    """The stored row as a dict, keys sorted, values as json writes them but the times."""
    row = {key: value for key, value in zip(_INPUT_KEYS, _input_values(c), strict=True)
           if not _is_default(key, value)}
    for key in _TIME_KEYS:
        value = row.get(key)
        if value is not None:
            row[key] = value.isoformat()
    return row


def _is_default(name: str, value: object) -> bool:
    """The field holds its default: left out of stored inputs. The type must match too, so
    1 (int) is written where the default is 1.0, and True where it is 1."""
    default = _DEFAULTS.get(name, _NO_DEFAULT)
    if isinstance(default, Enum):  # "note" and NodeType.NOTE print alike: both left out
        return value == default
    return type(value) is type(default) and value == default


_NO_DEFAULT = object()  # id, score and content: always written
_DEFAULTS = {f.name: f.default for f in fields(Candidate)
             if f.default is not MISSING and f.name not in ("id", "score", "content")}
_CONFIDENCE_DEFAULT, _SALIENCE_DEFAULT = _DEFAULTS["confidence"], _DEFAULTS["salience"]
assert type(_CONFIDENCE_DEFAULT) is float and type(_SALIENCE_DEFAULT) is float


_TIME_KEYS = ("event_time", "valid_from", "valid_to")
# canonical_json's encoder minus the key sort: input_row_json inserts the keys sorted.
_encode_sorted = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


_INPUT_KEYS = sorted(Candidate.__slots__)
_input_values = attrgetter(*_INPUT_KEYS)
# The floats, written in afresh for each row (_remembered_row_json), in key order.
_FLOAT_KEYS = ("confidence", "salience", "score")
_floats = attrgetter(*_FLOAT_KEYS)
_INFINITY = math.inf
_fixed_values = attrgetter(*(key for key in _INPUT_KEYS if key not in _FLOAT_KEYS))
# The other fields where equal values of different types print apart (1 == True); text,
# enum, tuple and UTC time fields print the same for equal values, so only these types
# join the remembered row's key.
_fixed_numbers = attrgetter("path_count", "pinned", "session_position", "token_cost_estimate")


def seal_receipt(body: dict[str, Any], *, receipt_id: str, bundle_id: str, created_at: datetime,
                 chain_namespace: str, seq: int, prev_sha256: str | None, inputs: str,
                 query: dict[str, Any] | None, session_id: str | None) -> tuple[str, str]:
    """Add the chain fields to a receipt body; return its canonical text and that text's sha256.

    >>> text, digest = seal_receipt({"receipt_version": 1}, receipt_id="r", bundle_id="b",
    ...     created_at=datetime(2026, 1, 1, tzinfo=UTC), chain_namespace="", seq=1,
    ...     prev_sha256=None, inputs="[]", query=None, session_id=None)
    >>> digest == sha256_text(text)
    True
    """
    receipt = {key: canonical_json(value) for key, value in body.items()}
    return seal_fragments(receipt, receipt_id=receipt_id, bundle_id=bundle_id,
                          created_at=created_at, chain_namespace=chain_namespace, seq=seq,
                          prev_sha256=prev_sha256, inputs=inputs, query=query,
                          session_id=session_id)


def seal_fragments(fragments: Mapping[str, str], *, receipt_id: str, bundle_id: str,
                   created_at: datetime, chain_namespace: str, seq: int,
                   prev_sha256: str | None, inputs: str, query: dict[str, Any] | None,
                   session_id: str | None) -> tuple[str, str]:
    """seal_receipt over a body already serialised per key (receipts.receipt_fragments)."""
    template = receipt_template(fragments, chain_namespace=chain_namespace,
                                inputs_sha256=sha256_text(inputs), query=query,
                                session_id=session_id)
    return seal_template(template, (  # in APPEND_FIELDS order
        canonical_json(bundle_id), canonical_json(created_at.astimezone(UTC).isoformat()),
        canonical_json(prev_sha256), canonical_json(receipt_id), canonical_json(seq)))


# The sealed fields only storage knows, in key order: what receipt_template leaves open.
APPEND_FIELDS = ("bundle_id", "created_at", "prev_sha256", "receipt_id", "seq")


def receipt_template(fragments: Mapping[str, str], *, chain_namespace: str,
                     inputs_sha256: str, query: dict[str, Any] | None,
                     session_id: str | None) -> tuple[str, ...]:
    """The sealed receipt's canonical text cut around the values of APPEND_FIELDS: six
    pieces, which seal_template() joins with them. Everything else is written here, where
    the bundle is packed (in a worker process for most of a GROUP BY's groups), so the
    one thread that appends to a chain only joins and hashes."""
    body = {key: text for key, text in fragments.items() if key not in _OPEN}
    body.update(chain_namespace=canonical_json(chain_namespace),
                inputs_sha256=canonical_json(inputs_sha256), query=canonical_json(query),
                session_id=canonical_json(session_id))
    keys = tuple(body)
    cuts = _TEMPLATE_ORDERS.get(keys)
    if cuts is None:
        # The keys between one open field and the next, each set sorted and spelled once.
        order = sorted(keys + APPEND_FIELDS)
        bounds = [order.index(name) for name in APPEND_FIELDS]
        cuts = tuple(tuple((key, json_string(key) + ":") for key in order[lo + 1:hi])
                     for lo, hi in zip([-1, *bounds], [*bounds, len(order)], strict=True))
        _remember(_TEMPLATE_ORDERS, keys, cuts, 64)
    pieces = []
    for i, run in enumerate(cuts):
        text = ",".join([name + body[key] for key, name in run])
        lead = "{" if i == 0 else ","
        if i < len(APPEND_FIELDS):
            pieces.append(lead + (text + "," if text else "") + _OPEN_NAMES[i])
        else:
            pieces.append((lead + text if text else "") + "}")
    return tuple(pieces)


_TEMPLATE_ORDERS: dict[tuple[str, ...], tuple[tuple[tuple[str, str], ...], ...]] = {}
_OPEN = frozenset(APPEND_FIELDS)
_OPEN_NAMES = tuple(json_string(name) + ":" for name in APPEND_FIELDS)
# receipt_template() writes these four itself: with APPEND_FIELDS, every sealed field.
assert SEALED_FIELDS == _OPEN | {"chain_namespace", "inputs_sha256", "query", "session_id"}


def seal_template(template: Sequence[str], values: Sequence[str]) -> tuple[str, str]:
    """The receipt text receipt_template() cut, joined with the JSON texts of the
    APPEND_FIELDS values in their order, and that text's sha256."""
    p0, p1, p2, p3, p4, p5 = template
    v0, v1, v2, v3, v4 = values
    text = f"{p0}{v0}{p1}{v1}{p2}{v2}{p3}{v3}{p4}{v4}{p5}"
    return text, sha256_text(text)

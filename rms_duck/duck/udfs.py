"""The Python functions behind the SQL surface, as vectorised Arrow UDFs.

Each receives DuckDB vectors (up to 2,048 rows) as pyarrow ChunkedArrays and returns one
Arrow array of the same length. Errors propagate as RmsError subclasses, so SQL users read
"CandidateError: candidate #3 ..." after DuckDB's prefix.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from ..errors import ConfigError, RmsError, did_you_mean
from ..packing.batches import pack_lists
from ..packing.repack import (
    check_canonical,
    check_receipt_body,
    compare_with_receipt,
    parse_receipt,
    repack,
)
from ..tokens.encodings import get_encoding, known_encodings, model_name_hint
from ..tokens.estimate import estimate_tokens
from .candidatetype import check_candidate_type, has_float_whole_field
from .stemming import stem_words
from .types import BUNDLE_SQL_TYPE
from .wholecast import check_whole_values, wholes_as_double_type


@dataclass(frozen=True, slots=True)
class Udf:
    name: str
    function: Callable[..., pa.Array]
    parameters: tuple[str, ...]
    return_type: str


def pack_udf(candidates: pa.ChunkedArray, budgets: pa.ChunkedArray,
             configs: pa.ChunkedArray) -> pa.Array:
    """One bundle per row: the rows of a GROUP BY pack in one call per 2,048 groups, on the
    path pack_batches() and the cluster recipes share (packing/batches.py)."""
    return pack_lists(candidates, budgets.to_pylist(), configs.to_pylist())


def token_count_udf(texts: pa.ChunkedArray, encodings: pa.ChunkedArray) -> pa.Array:
    names = encodings.unique().to_pylist()
    if len(names) == 1 and names[0] is not None:
        encode = get_encoding(names[0]).encode_ordinary
        values = texts.to_pylist()
        if texts.null_count == 0:
            return pa.array([len(encode(t)) for t in values], type=pa.int64())
        return pa.array([None if t is None else len(encode(t)) for t in values],
                        type=pa.int64())
    out: list[int | None] = []
    for text, name in zip(texts.to_pylist(), encodings.to_pylist(), strict=False):
        if text is None:
            out.append(None)  # a NULL text counts as NULL, whatever the encoding
            continue
        if name is None:
            raise ConfigError(f"rms_token_count: encoding must name an encoding such as "
                              f"'o200k_base' or 'cl100k_base', got NULL for the text "
                              f"{text[:40]!r}; pass one, or call rms_token_count(text) for "
                              "o200k_base")
        out.append(len(get_encoding(name).encode_ordinary(text)))
    return pa.array(out, type=pa.int64())


def token_estimate_udf(texts: pa.ChunkedArray, specs: pa.ChunkedArray) -> pa.Array:
    """Method 2 per text; each spec is NULL (o200k_base's ratios), a number of characters
    per token, or an encoding name whose per-script ratios to use."""
    parsed: dict[str | None, tuple[float | None, str | None]] = {}
    out = []
    for text, spec in zip(texts.to_pylist(), specs.to_pylist(), strict=False):
        if spec not in parsed:
            parsed[spec] = _estimate_spec(spec)
        ratio, encoding = parsed[spec]
        out.append(None if text is None else estimate_tokens(text, ratio, encoding=encoding))
    return pa.array(out, type=pa.int64())


_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def _estimate_spec(spec: str | None) -> tuple[float | None, str | None]:
    if spec is None:
        return None, None
    if _NUMBER.fullmatch(spec):  # plain decimal text only: float() also reads '4_0' and ' 4 '
        return float(spec), None
    known = known_encodings()
    if spec not in known and model_name_hint(spec) is not None:
        raise ConfigError(f"rms_token_estimate: {model_name_hint(spec)}")
    if spec not in known:
        raise ConfigError(
            f"rms_token_estimate's second argument must be characters per token (a number) or "
            f"an encoding name, got {spec!r}.{did_you_mean(spec, known)} Known encodings: "
            f"{', '.join(known)}")
    return None, spec


def stem_udf(words: pa.ChunkedArray, languages: pa.ChunkedArray) -> pa.Array:
    """The Snowball stem of each word, in the row's language ("none": the word itself)."""
    values, names = words.to_pylist(), languages.to_pylist()
    if len(set(names)) == 1:
        return pa.array(stem_words(values, names[0] or "none") if values else [],
                        type=pa.string())
    return pa.array([stem_words([w], n or "none")[0] for w, n in zip(values, names,
                                                                      strict=False)],
                    type=pa.string())


REPLAY_ARROW_TYPE = pa.struct([
    ("context_sha256", pa.string()), ("error", pa.string()), ("same_decisions", pa.bool_()),
    ("encoding_changed", pa.bool_()), ("differing_fields", pa.list_(pa.string()))])
REPLAY_SQL_TYPE = ("STRUCT(context_sha256 VARCHAR, error VARCHAR, same_decisions BOOLEAN, "
                   "encoding_changed BOOLEAN, differing_fields VARCHAR[])")


def replay_udf(inputs: pa.ChunkedArray, receipts: pa.ChunkedArray) -> pa.Array:
    """Re-pack each receipt's stored inputs: the replayed context_sha256 and how the rest of
    the replayed receipt agrees with the recorded one (packing/repack.py, as Python's
    replay compares), or why it could not be replayed.

    A bad row reports its error instead of failing the query, so rms_replay() over every
    receipt still lists the others.
    """
    out: list[dict[str, object]] = []
    for rows, receipt in zip(inputs.to_pylist(), receipts.to_pylist(), strict=False):
        failed: dict[str, object] = {"context_sha256": None, "same_decisions": None,
                                     "encoding_changed": None, "differing_fields": None}
        if rows is None:
            out.append({**failed,
                        "error": "no stored inputs: the receipt's bundle row is missing"})
            continue
        try:
            body = parse_receipt(receipt, "the receipt")
            check_receipt_body(body, "the receipt")
            check_canonical(receipt, body, "the receipt")
            # The budget and version stay what the receipt says (300.4 or true too), so
            # repack() refuses an edited one as Python's replay does.
            bundle = repack(rows, budget=body.get("budget"), config=body.get("config"),
                            receipt_version=body.get("receipt_version"))
            comparison = compare_with_receipt(body, bundle)
        except RmsError as exc:
            out.append({**failed, "error": f"{type(exc).__name__}: {exc}"})
        else:
            out.append({"context_sha256": bundle.context_sha256, "error": None,
                        "same_decisions": comparison.same_decisions,
                        "encoding_changed": comparison.encoding_changed,
                        "differing_fields": list(comparison.differing_fields)})
    return pa.array(out, type=REPLAY_ARROW_TYPE)


def candidate_type_udf(type_texts: pa.ChunkedArray, fns: pa.ChunkedArray) -> pa.Array:
    """For each candidate list type: the CandidateError naming a field whose type DuckDB's
    cast would change or refuse (duck/candidatetype.py); else False where a whole field is
    FLOAT or DOUBLE, whose values whole_values_udf checks first, and True otherwise."""
    out = []
    for type_text, fn in zip(type_texts.to_pylist(), fns.to_pylist(), strict=True):
        if type_text is not None:
            check_candidate_type(type_text, fn or "pack_context")
        out.append(type_text is None or not has_float_whole_field(type_text))
    return pa.array(out, pa.bool_())


def whole_values_udf(lists: pa.ChunkedArray) -> pa.Array:
    """True for each candidate list whose FLOAT or DOUBLE whole fields DuckDB can cast;
    otherwise the first CandidateError a Python entry point raises (duck/wholecast.py)."""
    check_whole_values(lists)
    return pa.array([True] * len(lists), pa.bool_())


UDFS = (
    Udf("rms_pack_udf", pack_udf, ("rms_candidate[]", "BIGINT", "VARCHAR"), BUNDLE_SQL_TYPE),
    Udf("rms_candidate_type_udf", candidate_type_udf, ("VARCHAR", "VARCHAR"), "BOOLEAN"),
    Udf("rms_whole_values_udf", whole_values_udf, (wholes_as_double_type() + "[]",),
        "BOOLEAN"),
    Udf("rms_token_count_udf", token_count_udf, ("VARCHAR", "VARCHAR"), "BIGINT"),
    Udf("rms_token_estimate_udf", token_estimate_udf, ("VARCHAR", "VARCHAR"), "BIGINT"),
    Udf("rms_stem_udf", stem_udf, ("VARCHAR", "VARCHAR"), "VARCHAR"),
    Udf("rms_replay_udf", replay_udf, ("VARCHAR", "VARCHAR"), REPLAY_SQL_TYPE),
)

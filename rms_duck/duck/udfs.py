"""The Python functions behind the SQL surface, as vectorised Arrow UDFs.

Each receives DuckDB vectors (up to 2,048 rows) as pyarrow ChunkedArrays and returns one
Arrow array of the same length. Errors propagate as RmsError subclasses, so SQL users read
"CandidateError: candidate #3 ..." after DuckDB's prefix.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from ..candidates import to_candidates
from ..columnar import Row, intake
from ..config import PackingConfig, parse_config
from ..errors import ConfigError, RmsError, did_you_mean
from ..packing.forecast import likely_lines
from ..packing.pipeline import pack_candidates
from ..packing.repack import repack
from ..records import Candidate
from ..tokens.bulk import default_processes, warm_counter
from ..tokens.counter import LineCounter
from ..tokens.encodings import get_encoding, known_encodings
from ..tokens.estimate import estimate_tokens
from .types import BUNDLE_ARROW_TYPE, BUNDLE_SQL_TYPE, bundle_row

# Bundles packed (and converted to Arrow) at a time within one 2,048-row UDF batch.
SLICE_BUNDLES = 512
# Content characters in one slice above which its lines are costed in bulk, in parallel:
# about 100K tokens, where a second process saves more than the hand-off costs.
BATCH_THRESHOLD_CHARS = 400_000


@dataclass(frozen=True, slots=True)
class Udf:
    name: str
    function: Callable[..., pa.Array]
    parameters: tuple[str, ...]
    return_type: str


def pack_udf(candidates: pa.ChunkedArray, budgets: pa.ChunkedArray,
             configs: pa.ChunkedArray) -> pa.Array:
    """One bundle per row: the rows of a GROUP BY pack in one call per 2,048 groups.

    The batch is packed in slices of SLICE_BUNDLES, each turned into Arrow before the
    next starts, so Python holds one slice's rows and bundles at a time. A large slice first
    costs the lines its packs will likely need, together and across processes (bulk.py);
    the packs then find them cached. Smaller slices cost each unseen line once, on first
    use. The bundles are the same either way.
    """
    parsed: dict[Any, PackingConfig] = {}
    chunks = []
    for start in range(0, len(candidates), SLICE_BUNDLES):
        jobs = []
        for rows, budget, raw in zip(
                candidate_rows(candidates.slice(start, SLICE_BUNDLES)),
                budgets.slice(start, SLICE_BUNDLES).to_pylist(),
                configs.slice(start, SLICE_BUNDLES).to_pylist(), strict=False):
            config = parsed.get(raw)
            if config is None:
                config = parsed[raw] = parse_config(raw)
            jobs.append([rows or [], budget, config])
        _cost_batch_lines(jobs)
        chunks.append(pa.array([bundle_row(pack_candidates(rows, budget=budget, config=config))
                                for rows, budget, config in jobs], type=BUNDLE_ARROW_TYPE))
    if not chunks:
        return pa.array([], type=BUNDLE_ARROW_TYPE)
    return pa.concat_arrays(chunks)


def candidate_rows(candidates: pa.ChunkedArray) -> list[list[Row] | None]:
    """The LIST(STRUCT) column as one list per bundle, validated a column at a time.

    columnar.intake() turns each chunk's candidate structs into Candidates wherever a row is
    already valid, and leaves the others as dicts, which pack_candidates() checks (and
    rejects) row by row with the usual message, so errors name the same row and field.
    """
    out: list[list[Row] | None] = []
    for chunk in candidates.chunks:
        if len(chunk) == 0:
            continue
        base = chunk.offsets[0].as_py()
        structs = chunk.values.slice(base, chunk.offsets[-1].as_py() - base)
        rows = intake(structs)
        offsets = chunk.offsets.to_pylist()
        for lo, hi, valid in zip(offsets, offsets[1:], chunk.is_valid().to_pylist(), strict=False):
            out.append(rows[lo - base:hi - base] if valid else None)
    return out


def _cost_batch_lines(jobs: list[list[Any]]) -> None:
    """Validate the batch's candidates and cost their likely lines in one bulk call, when
    the batch is large enough for worker processes to pay off."""
    chars = sum(len(row.content) if isinstance(row, Candidate) else
                len(row.get("content") or "") if isinstance(row, dict) else 0
                for rows, _, _ in jobs for row in rows)
    if chars < BATCH_THRESHOLD_CHARS or default_processes() < 2:
        return
    lines: dict[str, list[str]] = {}
    for job in jobs:
        rows, budget, config = job
        if not isinstance(budget, int):
            continue
        try:
            job[0] = to_candidates(rows)
        except RmsError:
            return  # the pack loop raises this error, in batch order
        lines.setdefault(config.encoding, []).extend(likely_lines(job[0], config, budget))
    for encoding, batch in lines.items():
        warm_counter(LineCounter(encoding), batch)


def token_count_udf(texts: pa.ChunkedArray, encodings: pa.ChunkedArray) -> pa.Array:
    names = encodings.unique().to_pylist()
    if len(names) == 1 and names[0] is not None:
        encode = get_encoding(names[0]).encode_ordinary
        values = texts.to_pylist()
        if texts.null_count == 0:
            return pa.array([len(encode(t)) for t in values], type=pa.int64())
        return pa.array([None if t is None else len(encode(t)) for t in values],
                        type=pa.int64())
    out = []
    for text, name in zip(texts.to_pylist(), encodings.to_pylist(), strict=False):
        if name is None:
            raise ConfigError("encoding must name an encoding such as 'o200k_base' or "
                              "'cl100k_base', got NULL")
        out.append(None if text is None else len(get_encoding(name).encode_ordinary(text)))
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


def _estimate_spec(spec: str | None) -> tuple[float | None, str | None]:
    if spec is None:
        return None, None
    try:
        return float(spec), None
    except ValueError:
        pass
    known = known_encodings()
    if spec not in known:
        raise ConfigError(
            f"rms_token_estimate's second argument must be characters per token (a number) or "
            f"an encoding name, got {spec!r}.{did_you_mean(spec, known)} Known encodings: "
            f"{', '.join(known)}")
    return None, spec


REPLAY_ARROW_TYPE = pa.struct([("context_sha256", pa.string()), ("error", pa.string())])


def replay_udf(inputs: pa.ChunkedArray, budgets: pa.ChunkedArray,
               configs: pa.ChunkedArray) -> pa.Array:
    """Re-pack stored inputs: the replayed context_sha256, or why it could not be replayed.

    A bad row reports its error instead of failing the query, so rms_replay() over every
    receipt still lists the others.
    """
    out = []
    for rows, budget, config in zip(inputs.to_pylist(), budgets.to_pylist(),
                                    configs.to_pylist(), strict=False):
        if rows is None:
            out.append({"context_sha256": None,
                        "error": "no stored inputs: the receipt's bundle row is missing"})
            continue
        try:
            bundle = repack(rows, budget=budget, config=config)
        except RmsError as exc:
            out.append({"context_sha256": None, "error": f"{type(exc).__name__}: {exc}"})
        else:
            out.append({"context_sha256": bundle.context_sha256, "error": None})
    return pa.array(out, type=REPLAY_ARROW_TYPE)


UDFS = (
    Udf("rms_pack_udf", pack_udf, ("rms_candidate[]", "BIGINT", "VARCHAR"), BUNDLE_SQL_TYPE),
    Udf("rms_token_count_udf", token_count_udf, ("VARCHAR", "VARCHAR"), "BIGINT"),
    Udf("rms_token_estimate_udf", token_estimate_udf, ("VARCHAR", "VARCHAR"), "BIGINT"),
    Udf("rms_replay_udf", replay_udf, ("VARCHAR", "BIGINT", "VARCHAR"),
        "STRUCT(context_sha256 VARCHAR, error VARCHAR)"),
)

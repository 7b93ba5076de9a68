"""The Python functions behind the SQL surface, as vectorised Arrow UDFs.

Each receives DuckDB vectors (up to 2,048 rows) as pyarrow ChunkedArrays and returns one
Arrow array of the same length. Errors propagate as RmsError subclasses, so SQL users read
"CandidateError: candidate #3 ..." after DuckDB's prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import pyarrow as pa

from ..config import PackingConfig, parse_config
from ..encodings import get_encoding
from ..errors import ConfigError
from ..estimate import estimate_tokens
from ..packing import pack_candidates
from .types import BUNDLE_ARROW_TYPE, BUNDLE_SQL_TYPE


@dataclass(frozen=True, slots=True)
class Udf:
    name: str
    function: Callable[..., pa.Array]
    parameters: tuple[str, ...]
    return_type: str


def pack_udf(candidates: pa.ChunkedArray, budgets: pa.ChunkedArray,
             configs: pa.ChunkedArray) -> pa.Array:
    """One bundle per row: the rows of a GROUP BY pack in one call per 2,048 groups."""
    parsed: dict[Any, PackingConfig] = {}
    out = []
    for rows, budget, raw in zip(candidates.to_pylist(), budgets.to_pylist(),
                                 configs.to_pylist()):
        config = parsed.get(raw)
        if config is None:
            config = parsed[raw] = parse_config(raw)
        out.append(pack_candidates(rows or [], budget=budget, config=config).to_row())
    return pa.array(out, type=BUNDLE_ARROW_TYPE)


def token_count_udf(texts: pa.ChunkedArray, encodings: pa.ChunkedArray) -> pa.Array:
    names = encodings.unique().to_pylist()
    if len(names) == 1 and names[0] is not None:
        encode = get_encoding(names[0]).encode_ordinary
        return pa.array([None if t is None else len(encode(t)) for t in texts.to_pylist()],
                        type=pa.int64())
    out = []
    for text, name in zip(texts.to_pylist(), encodings.to_pylist()):
        if name is None:
            raise ConfigError("encoding must name a tiktoken encoding such as 'cl100k_base', "
                              "got NULL")
        out.append(None if text is None else len(get_encoding(name).encode_ordinary(text)))
    return pa.array(out, type=pa.int64())


def token_estimate_udf(texts: pa.ChunkedArray, ratios: pa.ChunkedArray) -> pa.Array:
    return pa.array(
        [None if t is None else estimate_tokens(t, r)
         for t, r in zip(texts.to_pylist(), ratios.to_pylist())],
        type=pa.int64())


UDFS = (
    Udf("rms_pack_udf", pack_udf, ("rms_candidate[]", "BIGINT", "VARCHAR"), BUNDLE_SQL_TYPE),
    Udf("rms_token_count_udf", token_count_udf, ("VARCHAR", "VARCHAR"), "BIGINT"),
    Udf("rms_token_estimate_udf", token_estimate_udf, ("VARCHAR", "DOUBLE"), "BIGINT"),
)

"""Ranking in SQL: the composite weights and the lexical index behind rms_candidates().

The ranking itself is SQL (sql/ranking.sql): BM25 over words, character-trigram similarity,
optional vector similarity, pinned nodes and active tasks, merged into one row per node.
This module validates the weights a caller passes and keeps the lexical index current.
It runs SQL from the sql/ folder and never builds SQL text itself.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from ..errors import ConfigError
from .sqlfiles import read_sql

SIGNALS = ("lexical", "ngram", "vector", "salience")
_TOLERANCE = 1e-9


@dataclass(frozen=True, slots=True, kw_only=True)
class RankingWeights:
    """Weights of the composite score; each in [0, 1], summing to 1.

    >>> RankingWeights(lexical=0.6, ngram=0.3, vector=0.0, salience=0.1).as_struct()["ngram"]
    0.3
    """

    lexical: float = 0.45
    ngram: float = 0.25
    vector: float = 0.2
    salience: float = 0.1

    def __post_init__(self) -> None:
        for name in SIGNALS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not (
                math.isfinite(value) and 0.0 <= value <= 1.0
            ):
                raise ConfigError(f"ranking weight {name!r} must be a number in [0, 1], "
                                  f"got {value!r}")
        total = sum(getattr(self, name) for name in SIGNALS)
        if abs(total - 1.0) > _TOLERANCE:
            raise ConfigError(
                f"ranking weights must sum to 1, got {total:g} "
                f"({', '.join(f'{n}={getattr(self, n):g}' for n in SIGNALS)}); "
                "scale them so that they add up to 1")

    def as_struct(self) -> dict[str, float]:
        """The value to pass as rms_candidates(..., weights := ?)."""
        return {name: float(value) for name, value in asdict(self).items()}


def parse_weights(value: RankingWeights | dict[str, Any] | None) -> RankingWeights:
    """A RankingWeights from None (defaults), an instance or a dict (missing fields are 0).

    Raises:
        ConfigError: an unknown field, a value outside [0, 1], or a sum other than 1.
    """
    if value is None:
        return RankingWeights()
    if isinstance(value, RankingWeights):
        return value
    if not isinstance(value, dict):
        raise ConfigError(f"ranking weights must be a mapping of {', '.join(SIGNALS)}, "
                          f"got {value!r}")
    unknown = sorted(set(value) - set(SIGNALS))
    if unknown:
        raise ConfigError(f"unknown ranking weight {unknown[0]!r}; known: {', '.join(SIGNALS)}")
    return RankingWeights(**{name: value.get(name, 0.0) for name in SIGNALS})


@dataclass(frozen=True, slots=True)
class IndexRefresh:
    """What one refresh changed: nodes (re)indexed and index entries dropped."""

    indexed: int
    dropped: int


def refresh_index(con: Any, *, full: bool = False) -> IndexRefresh:
    """Bring the lexical index up to date with rms_nodes, in one transaction.

    Args:
        con: a connection prepared by rms_duck.connect() or rms_duck.register().
        full: drop the whole index first (after editing rms_stopwords, for example).

    Returns:
        The number of nodes indexed and of stale entries dropped.
    """
    # On `con` itself: the ranking macros the refresh uses are TEMP, so a cursor lacks them.
    con.execute("BEGIN TRANSACTION")
    try:
        if full:
            for table in ("rms_lexical_docs", "rms_lexical_terms", "rms_lexical_ngrams"):
                con.execute(f"DELETE FROM {table}")
        con.execute(read_sql("lexical_refresh.sql"))
        dropped = con.execute("SELECT count(*) FROM rms_refresh_stale").fetchall()[0][0]
        indexed = con.execute("SELECT count(*) FROM rms_refresh_new").fetchall()[0][0]
        con.execute("DROP TABLE rms_refresh_stale; DROP TABLE rms_refresh_new; "
                    "DROP TABLE rms_refresh_words")
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return IndexRefresh(indexed=int(indexed), dropped=int(dropped))

"""Ranking in SQL: the composite weights and the lexical index behind rms_candidates().

The ranking itself is SQL (sql/ranking.sql): BM25 over words, character-trigram similarity,
optional vector similarity, pinned nodes and active tasks, merged into one row per node.
This module validates the weights a caller passes and keeps the lexical index current.
It runs SQL from the sql/ folder and never builds SQL text itself.
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

import duckdb

from ..config import check_flag
from ..errors import ConfigError, DatabaseOpenError, did_you_mean
from .cursors import check_connection, explains_setup
from .sqlfiles import read_sql
from .stemming import check_language, stopwords_for
from .transactions import transaction_open

SIGNALS = ("lexical", "ngram", "vector", "salience")
_TOLERANCE = 1e-9



def _unit_fraction(value: object) -> bool:
    """A real number (not a bool) in [0, 1]: what weights and cue strengths must be."""
    return (not isinstance(value, bool) and isinstance(value, (int, float))
            and math.isfinite(value) and 0.0 <= value <= 1.0)

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
            if not _unit_fraction(value):
                raise ConfigError(f"ranking weight {name!r} must be a number in [0, 1], "
                                  f"got {value!r}; the defaults are lexical=0.45, ngram=0.25, "
                                  "vector=0.2, salience=0.1 (0 leaves a signal out)")
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
                          f"got {value!r}; pass for example {{'lexical': 0.6, 'ngram': 0.4}}")
    unknown = sorted(set(value) - set(SIGNALS))
    if unknown:
        raise ConfigError(f"unknown ranking weight {unknown[0]!r}."
                          f"{did_you_mean(unknown[0], SIGNALS)} Known: {', '.join(SIGNALS)}")
    return RankingWeights(**{name: value.get(name, 0.0) for name in SIGNALS})


CUE_FRACTIONS = ("speaker", "time", "specificity", "neighbour_decay", "feedback_weight")
CUE_COUNTS = ("neighbours", "neighbour_seeds", "feedback_docs", "feedback_terms")


@dataclass(frozen=True, slots=True, kw_only=True)
class RankingCues:
    """The cues rms_candidate_scores() adds to the composite score (docs/ranking.md).

    speaker: boost for nodes whose speaker the query names; time: boost for nodes in the
    month the query names; specificity: boost for nodes with rare words (not small talk);
    neighbours: turns either side of each of the neighbour_seeds best hits, in the same
    session, which inherit neighbour_decay x its score; feedback_docs/terms/weight:
    RM3-style query expansion from the top BM25 hits. 0 turns a cue off.

    >>> RankingCues(speaker=0.0).as_struct()["speaker"]
    0.0
    """

    speaker: float = 0.3
    time: float = 0.5
    specificity: float = 0.25
    neighbours: int = 2
    neighbour_decay: float = 0.8
    neighbour_seeds: int = 30
    feedback_docs: int = 5
    feedback_terms: int = 10
    feedback_weight: float = 0.5

    def __post_init__(self) -> None:
        for name in CUE_FRACTIONS:
            value = getattr(self, name)
            if not _unit_fraction(value):
                raise ConfigError(f"ranking cue {name!r} must be a number in [0, 1] "
                                  f"(0 turns it off), got {value!r}")
        for name in CUE_COUNTS:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"ranking cue {name!r} must be a whole number >= 0 "
                                  f"(0 turns it off), got {value!r}")

    @classmethod
    def off(cls) -> RankingCues:
        """Every cue off: the composite score alone."""
        return cls(speaker=0.0, time=0.0, specificity=0.0, neighbours=0, feedback_docs=0)

    def as_struct(self) -> dict[str, float | int]:
        """The value to pass as rms_candidates(..., cues := ?)."""
        return asdict(self)


def parse_cues(value: RankingCues | dict[str, Any] | None) -> RankingCues:
    """RankingCues from None (defaults), an instance or a dict (missing fields: defaults).

    Raises:
        ConfigError: an unknown field or a value out of range.
    """
    if value is None:
        return RankingCues()
    if isinstance(value, RankingCues):
        return value
    known = CUE_FRACTIONS + CUE_COUNTS
    if not isinstance(value, dict):
        raise ConfigError(f"ranking cues must be a mapping of {', '.join(known)}, "
                          f"got {value!r}; pass for example {{'speaker': 0}} to turn one off")
    unknown = sorted(set(value) - set(known))
    if unknown:
        raise ConfigError(f"unknown ranking cue {unknown[0]!r}."
                          f"{did_you_mean(unknown[0], known)} Known: {', '.join(known)}")
    return RankingCues(**value)


@dataclass(frozen=True, slots=True)
class IndexRefresh:
    """What one refresh changed: nodes (re)indexed and index entries dropped."""

    indexed: int
    dropped: int


@explains_setup("rms_duck.refresh_index")
def refresh_index(con: Any, *, full: bool = False) -> IndexRefresh:
    """Bring the lexical index up to date with rms_nodes, in one transaction.

    Incremental: only nodes added, edited or deleted since the last refresh are touched.
    The whole index is rebuilt when `full` is set or when its language changed (an index
    built before stemming existed is rebuilt once, with stems).

    Args:
        con: a connection prepared by rms_duck.connect() or rms_duck.register().
        full: drop the whole index first (after editing rms_stopwords, for example).

    Returns:
        The number of nodes indexed and of stale entries dropped.
    """
    check_connection(con, "rms_duck.refresh_index")
    check_flag("full", full, "pass full=True to rebuild the whole index")
    with _REFRESH_LOCK:
        return _refresh(con, full=full)


# One refresh at a time in this process (and DuckDB lets only one process write a file):
# two at once write the same index rows, and the later one failed on a write-write
# conflict or a duplicate key. The one that waited finds the other's rows committed.
_REFRESH_LOCK = threading.RLock()


def _forked() -> None:
    """In a child forked while another thread refreshed: the lock was copied held by a
    thread the child does not have, and every refresh there would wait for ever."""
    global _REFRESH_LOCK
    _REFRESH_LOCK = threading.RLock()


if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_forked)


def _refresh(con: Any, *, full: bool) -> IndexRefresh:
    # On `con` itself: the ranking macros the refresh uses are TEMP, so a cursor lacks them.
    _begin(con)
    try:
        [(changed,)] = con.execute(
            "SELECT count(*) FILTER (WHERE indexed_language IS DISTINCT FROM language) > 0 "
            "FROM rms_lexical_config").fetchall()
        if full or changed:
            for table in ("rms_lexical_docs", "rms_lexical_terms", "rms_lexical_ngrams",
                          "rms_lexical_stems"):
                con.execute(f"DELETE FROM {table}")
        con.execute(read_sql("lexical_refresh.sql"))
        dropped = con.execute("SELECT count(*) FROM rms_refresh_stale").fetchall()[0][0]
        indexed = con.execute("SELECT count(*) FROM rms_refresh_new").fetchall()[0][0]
        con.execute("DROP TABLE rms_refresh_stale; DROP TABLE rms_refresh_new; "
                    "DROP TABLE rms_refresh_words; DROP TABLE rms_refresh_stems")
        con.execute("COMMIT")
    except BaseException as exc:
        con.execute("ROLLBACK")
        _refuse_read_only(exc, "refresh the lexical index")
        raise
    return IndexRefresh(indexed=int(indexed), dropped=int(dropped))


def _begin(con: Any, what: str = "the lexical index is refreshed in a transaction of its "
                                  "own (rms_duck.pack refreshes a stale one before a ranking "
                                  "query reads it)") -> None:
    """BEGIN a transaction of the index's own on `con`. One the caller has open is left
    alone: a BEGIN inside it would abort it, losing the caller's uncommitted rows (and a
    ranking query, on a cursor, would not see those rows anyway). `what` says which change
    needs a transaction of its own."""
    if transaction_open(con):
        raise duckdb.TransactionException(
            f"{what}, and this connection has a transaction open; COMMIT or ROLLBACK it first")
    con.execute("BEGIN TRANSACTION")


def _refuse_read_only(exc: BaseException, what: str) -> None:
    """DuckDB's own "Cannot execute statement of type DELETE ... in read-only mode" named
    neither the call nor a way out, though rms_candidates' stale-index error sends the
    reader here."""
    if isinstance(exc, duckdb.InvalidInputException) and "read-only" in str(exc):
        ranking = (", or rank on the index as it is with rms_candidates(..., stale_ok := "
                   "true)") if what.startswith("refresh") else ""
        raise DatabaseOpenError(
            f"cannot {what}: the database is open read-only; open it writable with "
            f"rms_duck.connect(path) to do so{ranking}") from None


@explains_setup("rms_duck.duck.ranking.set_index_language")
def set_index_language(con: Any, language: str, *,
                       stopwords: list[str] | None = None) -> IndexRefresh:
    """Index in another language: its Snowball stemmer and its stop words, then rebuild.

    Args:
        con: a connection prepared by rms_duck.connect() or rms_duck.register().
        language: a Snowball stemmer name ('english', 'german', 'french', ...; see
            rms_duck.duck.stemming.languages()), or 'none' to index words unstemmed.
        stopwords: the words to skip; default: the list shipped for the language (English:
            the schema's list; others: the `stop-words` package). They replace rms_stopwords.

    Raises:
        ConfigError: an unknown language, no stop word list for it, or stopwords that are
            not a list of words.
    """
    check_connection(con, "rms_duck.duck.ranking.set_index_language")
    language = check_language(language)
    words = stopwords_for(language) if stopwords is None else _stopword_list(stopwords)
    # Under the refresh lock: a refresh between the change and the rebuild would index in
    # the new language with the old stop words, or write rows the rebuild then conflicts on.
    with _REFRESH_LOCK:
        _begin(con, "the index language is changed in a transaction of its own")
        try:
            con.execute("UPDATE rms_lexical_config SET language = ?", [language])
            con.execute("DELETE FROM rms_stopwords")
            if words:
                con.execute("INSERT INTO rms_stopwords SELECT unnest(?::VARCHAR[])", [words])
            con.execute("COMMIT")
        except BaseException as exc:
            con.execute("ROLLBACK")
            _refuse_read_only(exc, "change the index language")
            raise
        return refresh_index(con, full=True)


def _stopword_list(stopwords: Any) -> list[str]:
    """The caller's stop words, trimmed, lower-cased and sorted. A string is refused: Python
    would iterate its letters, so "der die" indexed without the letters d, e, r and i."""
    words = list(stopwords) if isinstance(stopwords, Iterable) and not isinstance(
        stopwords, str) else None  # list(3) raised a bare TypeError
    if words is None or not all(isinstance(w, str) for w in words):
        raise ConfigError(
            f"stopwords must be a list of words, got {stopwords!r}; pass for example "
            "stopwords=['der', 'die', 'das'] (or leave it out for the language's own list)")
    return sorted({w.strip().lower() for w in words if w.strip()})

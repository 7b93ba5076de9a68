"""The error tree: one base class, a few subclasses, each a ValueError or LookupError too."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping


class RmsError(Exception):
    """Base class for every error rms_duck raises."""


class CandidateError(RmsError, ValueError):
    """A candidate record is malformed."""


class ConfigError(RmsError, ValueError):
    """A packing configuration value is invalid."""


class EncodingUnavailableError(RmsError, LookupError):
    """A tokenizer encoding cannot be loaded from any local, verified source."""


class QueryRejectedError(RmsError, ValueError):
    """A ranking query is not one read-only SELECT.

    `unknown_name` is set when the query reads a name that is no table, view or CTE of the
    database, so a caller with no DataFrames to register (an MCP agent) can give its own fix.
    """

    def __init__(self, message: str, *, unknown_name: str | None = None) -> None:
        super().__init__(message)
        self.unknown_name = unknown_name


class ReceiptError(RmsError):
    """A receipt is missing, malformed or does not match its digest."""


class ContextRefError(RmsError, LookupError):
    """A citation reference such as 'm3' names no packed record."""


class StoredObjectError(RmsError):
    """An object stored in the database is in the way of rms_duck's own (a macro named
    like one of its UDFs) and the connection is read-only, so it cannot be removed."""


class UdfOwnerError(RmsError):
    """register(con, replace=True) met UDFs another Python connection to the same database
    registered: DuckDB lets only the connection that registered a UDF remove it."""


class DatabaseOpenError(RmsError, OSError):
    """The database file cannot be opened: not a DuckDB file, a folder, a missing folder, no
    permission, or (read-only) a file rms_duck never set up."""


class DatabaseInUseError(DatabaseOpenError):
    """Another process holds the database file open for writing, so it cannot be opened."""


class QueryLimitError(QueryRejectedError):
    """A ranking query ran past its timeout or returned more than max_rows rows."""


class RmsWarning(UserWarning):
    """Something was wrong and has been repaired (a changed stored view, a wrong cached cost)."""


def did_you_mean(value: object, choices: Iterable[str]) -> str:
    """Return ' Did you mean 'x'?' for the closest choice, or ''."""
    close = difflib.get_close_matches(str(value), list(choices), n=1)
    return f" Did you mean {close[0]!r}?" if close else ""


def renames_for(missing: Iterable[str],
                others: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """For each missing field, "'scroe' to 'score'" when a given name is close to it (others
    maps each lower-cased given name to the name as given), else the field quoted:
    (renames, fields with no close name). A given name is renamed to one field only, the
    one it is closest to ('scontent' was told to become both 'score' and 'content')."""
    fields = list(missing)
    pairs = sorted(
        (-difflib.SequenceMatcher(None, close, name).ratio(), index, close)
        for index, name in enumerate(fields)
        for close in difflib.get_close_matches(name, list(others), n=max(len(others), 1),
                                               cutoff=0.6))
    chosen: dict[int, str] = {}
    for _, index, close in pairs:
        if index not in chosen and close not in chosen.values():
            chosen[index] = close
    renames = [f"{others[chosen[i]]!r} to {name!r}" for i, name in enumerate(fields)
               if i in chosen]
    absent = [repr(name) for i, name in enumerate(fields) if i not in chosen]
    return renames, absent


class MissingExtraError(RmsError, ImportError):
    """An optional integration's package (an extra such as rms-duck[dask]) is not installed."""

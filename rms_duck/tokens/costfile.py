"""Persisted line costs away from the store: the keys they are stored under, and a reader
for the Parquet file rms_duck.export_line_costs() writes, so cluster workers start warm.

A cost is keyed by (encoding key, sha256 of the line's UTF-8 bytes) and cannot go stale:
the encoding key digests the BPE ranks and the pre-tokenizer pattern, the line digest
every byte of the line. Loaded costs serve one LineCounter only (LineCounter.prime), never
the process-wide cache, so a tampered file cannot leak into other packs. pyarrow is
imported only when a file is read.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable, Mapping
from functools import lru_cache

from ..errors import ConfigError
from ..escape import utf8
from .counter import LineCounter
from .encodings import DEFAULT_ENCODING, encoding_source

COLUMNS = ("encoding", "line_sha256", "n_tokens")


def encoding_key(encoding: str) -> str:
    """'o200k_base:<16 hex>': the name plus a digest of its ranks' (or tokenizer file's)
    sha256 and its pre-tokenizer, read each time: a re-registered tokenizer file gets a
    new key.

    >>> encoding_key("o200k_base").startswith("o200k_base:")
    True
    """
    return f"{encoding}:{encoding_source(encoding).fingerprint[:16]}"


def line_sha256(line: str) -> str:
    """The digest a line's persisted cost is stored under: sha256 of its exact UTF-8 bytes."""
    return hashlib.sha256(utf8(line)).hexdigest()


class LineCosts:
    """Exact costs of lines (newline included) for one encoding, keyed by line digest."""

    __slots__ = ("encoding", "_costs")

    def __init__(self, costs: Mapping[str, int], *, encoding: str = DEFAULT_ENCODING) -> None:
        if not isinstance(costs, Mapping):
            # A file's path failed in dict(): "dictionary update sequence element #0 has
            # length 1; 2 is required".
            fix = (f"for a file written by export_line_costs() use "
                   f"rms_duck.LineCosts.read({os.fspath(costs)!r})"
                   if isinstance(costs, (str, os.PathLike)) else
                   "pass a dict such as {line_sha256(line): n_tokens}, or "
                   "rms_duck.LineCosts.read(path) for a file")
            raise ConfigError(f"LineCosts costs must be a mapping of line sha256 to tokens, got "
                              f"{type(costs).__name__} {costs!r:.80}; {fix}")
        self.encoding = encoding
        self._costs = dict(costs)

    @classmethod
    def read(cls, path: str | os.PathLike[str], *, encoding: str = DEFAULT_ENCODING) -> LineCosts:
        """The costs for `encoding` in a file written by export_line_costs(); read once per
        process while the file is unchanged (workers call this for every partition).

        Raises:
            ConfigError: the file is missing, unreadable, or lacks a column.
        """
        try:
            stat = os.stat(path)
        except OSError as exc:
            raise ConfigError(f"line_costs file {os.fspath(path)!r} cannot be read ({exc}); "
                              "write it with rms_duck.export_line_costs(con, path) and make "
                              "it reachable from every worker") from None
        return _read(os.fspath(path), stat.st_size, stat.st_mtime_ns, encoding)

    def __len__(self) -> int:
        return len(self._costs)

    def __repr__(self) -> str:
        return f"LineCosts({len(self._costs):,} lines, encoding={self.encoding!r})"

    def prime(self, counter: LineCounter, lines: Iterable[str]) -> int:
        """Give `counter` the known costs of those `lines` it has not cached. Returns how many."""
        if counter.encoding != self.encoding:
            return 0
        costs = self._costs
        found = []
        for line in counter.unseen(lines):
            cost = costs.get(line_sha256(line))
            if cost is not None:
                found.append((line, cost))
        counter.prime(found)
        return len(found)


@lru_cache(maxsize=4)
def _read(path: str, size: int, mtime_ns: int, encoding: str) -> LineCosts:
    import pyarrow.parquet as pq

    key = encoding_key(encoding)  # an unknown encoding raises its own error
    try:
        table = pq.read_table(path, columns=list(COLUMNS), filters=[("encoding", "==", key)])
    except Exception as exc:  # noqa: BLE001 - pyarrow raises several types for a bad file
        raise ConfigError(f"line_costs file {path!r} is not a line-cost Parquet file with "
                          f"columns {', '.join(COLUMNS)} ({type(exc).__name__}: {exc}); "
                          "write it with rms_duck.export_line_costs(con, path)") from None
    digests = table.column("line_sha256").to_pylist()
    return LineCosts(dict(zip(digests, table.column("n_tokens").to_pylist(), strict=True)),
                     encoding=encoding)

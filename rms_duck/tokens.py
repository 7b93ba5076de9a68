"""Exact token counts (RFC Method 1) with a per-line cache.

A context is a sequence of lines, each ending in "\\n", each starting with a non-space
character and holding no line break. cl100k's and o200k's pre-tokenizer then never lets a
piece span a line boundary: a newline always ends the piece it is in, and a piece never
starts with a newline joined to the next line's first character. So the context's count is
exactly the sum of count(line + "\\n") over its lines. The packer relies on that sum and
still verifies the whole output once at the end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from .encodings import get_encoding

_CACHE_LIMIT = 1_000_000
_CACHES: dict[str, dict[str, int]] = {}
_CACHES_LOCK = threading.Lock()


def count_tokens(text: str, encoding: str = "cl100k_base") -> int:
    """Exact count of `text`, special-token spellings counted as ordinary text.

    >>> count_tokens("hello world")
    2
    """
    return len(get_encoding(encoding).encode_ordinary(text))


class LineCounter:
    """Counts context lines exactly, caching each line's cost process-wide per encoding."""

    def __init__(self, encoding: str = "cl100k_base") -> None:
        enc = get_encoding(encoding)
        self.encoding = encoding
        self._encode = enc.encode_ordinary
        # The longest token in the vocabulary bounds how many characters one token covers.
        self.max_token_chars = max(len(token) for token in enc.token_byte_values())
        with _CACHES_LOCK:
            self._cache = _CACHES.setdefault(encoding, {})
        self.misses = 0

    def count(self, text: str) -> int:
        return len(self._encode(text))

    def line_cost(self, line: str) -> int:
        """Exact tokens of `line + "\\n"`, from the cache when this line was seen before."""
        cost = self._cache.get(line)
        if cost is None:
            cost = len(self._encode(line + "\n"))
            self.misses += 1
            self._remember(line, cost)
        return cost

    def cached_cost(self, line: str) -> int | None:
        return self._cache.get(line)

    def lower_bound(self, line: str) -> int:
        """A cheap floor on line_cost(line): no token spans more than max_token_chars bytes."""
        return -(-(len(line) + 1) // self.max_token_chars)

    def prime(self, costs: Iterable[tuple[str, int]]) -> None:
        """Load known line costs (for example persisted ones) into the cache."""
        for line, cost in costs:
            self._remember(line, cost)

    def _remember(self, line: str, cost: int) -> None:
        cache = self._cache
        if len(cache) >= _CACHE_LIMIT:
            # Drop the oldest tenth; dicts iterate in insertion order.
            for key in list(cache)[: _CACHE_LIMIT // 10]:
                cache.pop(key, None)
        cache[line] = cost


def clear_line_cache() -> None:
    """Forget every cached line cost (tests use it to measure the cold path)."""
    with _CACHES_LOCK:
        for cache in _CACHES.values():
            cache.clear()

"""Exact token counts (RFC Method 1) with a per-line cache.

A context is a sequence of lines, each ending in "\\n", each starting with a non-space
character other than "/" and holding no line break. The pre-tokenizer of every tiktoken
encoding then never lets a piece span a line boundary: a newline always ends the piece it is
in, and a piece never starts with a newline joined to the next line's first character.
(o200k's punctuation piece `[^\\s\\p{L}\\p{N}]+[\\r\\n/]*` would take a leading "/" of the
next line along, hence that exception; no built-in format starts a line with "/".) So the
context's count is exactly the sum of count(line + "\\n") over its lines
(tests/test_encoding_properties.py checks it per encoding with hypothesis; hf.py detects it
per Hugging Face tokenizer). The packer relies on that sum. Where the pattern proves it
(sums_exactly: cl100k_base and o200k_base, every cost from the tokenizer) the sum is the
count; anywhere else the whole output is counted once at the end and records are dropped
until that count fits, so a backend without additivity stays exact, only slower.

The cache maps (encoding name, exact line text) to the line's cost, so it cannot go stale:
a changed byte is a different key. It holds only tokenizer results and is capped by the
memory its lines take, not by their number. duck/linecosts.py persists the same costs in
DuckDB; those are loaded per counter, checked against cheap bounds (cost_bounds), and
whatever the final whole-output count cannot confirm is recounted after the pack.
"""

from __future__ import annotations

import re
import sys
import threading
from collections.abc import Callable, Iterable

from ..errors import ConfigError
from ..escape import utf8
from .encodings import DEFAULT_ENCODING, encoding_source, get_encoding, load_encoding

# Bytes of line text (and entry overhead) the process-wide cache keeps per encoding; the
# oldest quarter is dropped when it is full. A line larger than an eighth of it is not kept.
CACHE_BYTES = 64 * 1024 * 1024
_ENTRY_OVERHEAD = 100  # the dict slot and the int beside the str object
_CACHES: dict[str, dict[str, int]] = {}
_CACHE_SIZES: dict[str, int] = {}
_FLOORS: dict[str, dict[str, int]] = {}
# The floor memo keeps texts of at most _FLOOR_TEXT_CHARS characters, at most _FLOOR_LIMIT
# of them and _FLOOR_CHARS characters in all per encoding (the oldest quarter goes first):
# a warm pack looks up every candidate's floor, long texts included.
_FLOOR_TEXT_CHARS = 16_384
_FLOOR_LIMIT = 32_768
_FLOOR_CHARS = 8 * 1024 * 1024
_FLOOR_SIZES: dict[str, list[int]] = {}
_CACHES_LOCK = threading.Lock()
# Per encoding: the costs of short texts (joined_cost), and the compiled pre-tokenizer.
_SHORT: dict[str, dict[str, int]] = {}
_JOINED: dict[str, dict[tuple[str, str, str], int]] = {}
# Joined lines are remembered only up to this many characters, and this many per memo, so
# the memos stay within about 32 MB per encoding whatever the records hold.
_JOINED_CHARS = 1_024
_JOINED_LIMIT = 32_768
_DERIVED: dict[str, dict[str, int]] = {}
_NONE: dict[str, int] = {}
_SCANNERS: dict[str, object] = {}
_MAX_TOKEN_BYTES: dict[str, int] = {}

# Characters str.split() treats as whitespace but a rendered line does not: JSON-string
# escaping turns them into visible escapes (\t, \n, \u2028, ...), so they separate nothing.
_ESCAPED_SPACE = re.compile("[\t-\r\x1c-\x1f\x85\u2028\u2029]")


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Exact count of `text`, special-token spellings counted as ordinary text.

    >>> count_tokens("hello world")
    2
    """
    if not isinstance(text, str):
        # tiktoken's own words: "'bytes' object is not an instance of 'str'".
        fix = ("decode it first: count_tokens(data.decode('utf-8'))"
               if isinstance(text, (bytes, bytearray)) else "pass the text as a str")
        raise ConfigError(f"count_tokens text must be a str, got {type(text).__name__} "
                          f"{text!r:.80}; {fix}")
    return len(get_encoding(encoding).encode_ordinary(text))


def max_token_bytes(encoding: str) -> int | None:
    """The longest token of a tiktoken vocabulary in bytes (computed once per process);
    None for a backend whose tokens need not map to a bounded run of the input."""
    longest = _MAX_TOKEN_BYTES.get(encoding)
    if longest is None:
        enc, source = load_encoding(encoding)
        if not source.word_floor:
            return None
        # The ranks' keys are the same tokens as token_byte_values(), read in a third of the
        # time (5.5 against 13 ms for o200k_base): each process pays it at its first pack.
        ranks = getattr(enc, "_mergeable_ranks", None)
        longest = max(map(len, ranks if isinstance(ranks, dict) else enc.token_byte_values()))
        _MAX_TOKEN_BYTES[encoding] = longest
    return longest


def forget_encoding(encoding: str) -> None:
    """Drop what this process cached for `encoding` (a tokenizer file was re-registered)."""
    with _CACHES_LOCK:
        _CACHES.pop(encoding, None)
        _MAX_TOKEN_BYTES.pop(encoding, None)


def word_runs(text: str) -> int:
    """Runs of non-space characters that stay apart once `text` is JSON-escaped onto a line.

    Every pre-tokenizer piece of the GPT encodings holds at most one such run (a piece is
    spaces, or an optional space and one run), so a line holding `text` costs at least this
    many tokens.

    >>> word_runs("two words")
    2
    >>> word_runs("one\\tescaped")
    1
    """
    if text.isprintable():
        # No white space but " " (str.isprintable refuses every other), so none of the
        # characters whose escape changes the runs (controls, U+0085, U+2028/2029, all
        # unprintable): without a double space the runs are the spaces plus one, less a
        # space at either end (counted, not split: half to two thirds of the time, and a
        # cold pack floors every candidate).
        if "  " not in text:
            return text.count(" ") + 1 - (text[0] == " ") - (text[-1] == " ") if text else 0
        return len(text.split())
    if _ESCAPED_SPACE.search(text):
        text = _ESCAPED_SPACE.sub("x", text)
    return len(text.split())


def cost_bounds(line: str, max_token_chars: int | None) -> tuple[int, int]:
    """(least, most) tokens `line + "\\n"` can cost: no token is shorter than one byte or
    longer than the vocabulary's longest token, and no token spans two word runs.
    A backend with no such vocabulary facts (tokenizer.json, max_token_chars None) gets
    only the byte ceiling."""
    size = len(utf8(line)) + 1
    if max_token_chars is None:
        return 0, size
    return max(1, word_runs(line), -(-size // max_token_chars)), size


def cache_bytes(encoding: str | None = None) -> int:
    """The memory the process-wide line cache accounts for (one encoding, or all)."""
    with _CACHES_LOCK:
        if encoding is not None:
            return _CACHE_SIZES.get(encoding, 0)
        return sum(_CACHE_SIZES.values())


class LineCounter:
    """Counts context lines exactly, caching each line's cost process-wide per encoding."""

    def __init__(self, encoding: str = DEFAULT_ENCODING, *, record: bool = False,
                 shared: bool = True) -> None:
        enc = get_encoding(encoding)
        self.encoding = encoding
        self._encode = enc.encode_ordinary
        # The longest token in the vocabulary bounds how many characters one token covers
        # (None: no such bound for this backend, so lower_bound() is 0).
        self.max_token_chars = max_token_bytes(encoding)
        # shared=False starts from nothing: audits recount instead of trusting any cache.
        self._shared = shared
        with _CACHES_LOCK:
            self._cache = _CACHES.setdefault(encoding, {}) if shared else {}
            # Floors depend only on the text and the vocabulary's longest token.
            self._floors = _FLOORS.setdefault(encoding, {}) if shared else {}
            self._floor_chars = _FLOOR_SIZES.setdefault(encoding, [0]) if shared else [0]
        self.misses = 0
        # With record=True, the lines this counter tokenized, for costcache to persist.
        self._fresh: dict[str, int] | None = {} if record else None
        # Costs loaded from storage serve this counter only: a tampered rms_line_costs row
        # must never leak into the process-wide cache, which only tokenizer results enter.
        self._loaded: dict[str, int] = {}
        # Loaded costs this counter answered with (checked after the pack), loaded costs
        # refused for being out of bounds (line -> stored cost), and how often the whole
        # output's count disagreed with the sum of its line costs.
        self.consulted: set[str] = set()
        self.rejected: dict[str, int] = {}
        self.mismatches = 0
        # Called once, at the first line no cache holds (see load_on_first_miss).
        self._on_first_miss: Callable[[LineCounter], object] | None = None
        # An audit's counter (shared=False) proves nothing from the pattern: it recounts.
        self._proven = shared and encoding_source(encoding).lines_proven

    def count(self, text: str) -> int:
        return len(self._encode(text))

    def line_cost(self, line: str) -> int:
        """Exact tokens of `line + "\\n"`, from the cache when this line was seen before."""
        cost = self._cache.get(line)
        if cost is None and self._proven:
            # A joined line whose cost joined_cost() read off its parts (the pattern proves
            # it, as it proves sums_exactly): never a miss that loads stored costs.
            cost = _DERIVED.get(self.encoding, _NONE).get(line)
        if cost is None and self._loaded:
            cost = self._loaded.get(line)
            if cost is not None:
                self.consulted.add(line)
        if cost is None and self._on_first_miss is not None:
            load, self._on_first_miss = self._on_first_miss, None
            load(self)
            cost = self._loaded.get(line)
            if cost is not None:
                self.consulted.add(line)
        if cost is None:
            cost = len(self._encode(line + "\n"))
            self.misses += 1
            self._remember(line, cost)
            if self._fresh is not None:
                self._fresh[line] = cost
        return cost

    def joined_cost(self, prefix: str, line: str, sep: str = " ",
                    line_cost: int | None = None) -> int:
        """Exact tokens of `prefix + sep + line + "\\n"`, read off line_cost(line) (or the
        `line_cost` given) and two short counts where the cl100k_base or o200k_base pattern
        proves the split, else counted whole. The reader prices a date line opening the line
        below it ('3 Jan Maya:', sep " ") and a speaker on its record's line ('Maya:"..."',
        sep ":") this way for every record it tries, rather than tokenize each record's line
        two or three times.

        The pieces of the joined line are those of `prefix` (whose last piece ends at its
        last character, a letter or digit: no piece takes a letter or digit and then a space
        or a colon), then those of sep + line. Those in turn are the pieces of `line` from
        the first place where both scans of it (with and without sep) end a piece: neither
        pattern looks behind, so the scans agree from there. BPE never merges across
        pieces, so only the pieces before that place differ.
        """
        if not self._proven or len(line) > _JOINED_CHARS:  # remember short lines only
            return self._joined_cost(prefix, line, sep, line_cost)
        memo = _JOINED.setdefault(self.encoding, {})
        key = (prefix, sep, line)
        cost = memo.get(key)
        if cost is None:
            cost = self._joined_cost(prefix, line, sep, line_cost)
            if len(memo) >= _JOINED_LIMIT:
                memo.clear()
            memo[key] = cost
        return cost

    def _joined_cost(self, prefix: str, line: str, sep: str, line_cost: int | None) -> int:
        scanner = _scanner(self.encoding) if self._proven else None
        whole = f"{prefix}{sep}{line}"
        if scanner is None or not prefix or not prefix[-1].isalnum() or not line \
                or line[0].isspace() or sep not in (" ", ":"):
            return self.line_cost(whole)
        plain, joined = 0, 0  # where each scan has got to: in `line`, in sep + line
        with_sep = sep + line
        for _ in range(8):
            if plain == joined - 1 and plain:
                break
            if plain < joined - 1 or plain == 0 and joined:
                found = scanner.match(line, plain)
                plain = found.end() if found and found.end() > plain else -1
            else:
                found = scanner.match(with_sep, joined)
                joined = found.end() if found and found.end() > joined else -1
            if plain < 0 or joined < 0 or plain >= len(line) or joined > len(line):
                return self.line_cost(whole)
        else:
            return self.line_cost(whole)
        head = line[:plain]
        own = self.line_cost(line) if line_cost is None else line_cost
        cost = self._short(prefix) + own - self._short(head) + self._short(sep + head)
        if len(whole) <= _JOINED_CHARS:
            # line_cost() answers for the joined line from here: assembly prints it.
            derived = _DERIVED.setdefault(self.encoding, {})
            if len(derived) >= _JOINED_LIMIT:
                derived.clear()
            derived[whole] = cost
        return cost

    def _short(self, text: str) -> int:
        """Tokens of a short piece of a line (a date, a name), remembered per encoding."""
        if len(text) > 256:
            return len(self._encode(text))
        memo = _SHORT.setdefault(self.encoding, {})
        cost = memo.get(text)
        if cost is None:
            cost = len(self._encode(text))
            if len(memo) >= _JOINED_LIMIT:
                memo.clear()
            memo[text] = cost
        return cost

    def sums_exactly(self, lines: Iterable[str]) -> bool:
        """True when "".join(line + "\\n" for line in lines) provably costs exactly the sum
        of line_cost(line) over `lines`, so counting it again could only repeat that sum.

        It holds for the cl100k_base and o200k_base patterns when no line is empty, starts
        with a space, "/" or a line break, or ends in a space. A piece can then cross a
        line's closing newline only through `[^\\s\\p{L}\\p{N}]+[\\r\\n/]*` (which stops
        at the next line's first character, neither "/" nor a break) or through a run of
        spaces and breaks (which stops there too, as that character is not a space); no
        other part of either pattern matches a newline or looks past one, and BPE never
        merges across pieces. Every cost must also come from the tokenizer here (or from
        joined_cost, which reads a joined line's cost off tokenizer counts of its parts by
        the same pattern): a cost loaded from storage is not evidence, so a counter that
        used one returns False.
        """
        if not self._proven or self.consulted or self.rejected:
            return False
        for line in lines:
            if not line or line[0] == "/" or line[0].isspace() or line[-1].isspace():
                return False
        return True

    @property
    def pattern_proven(self) -> bool:
        """Whether costs may be argued from the cl100k_base or o200k_base pattern itself
        (sums_exactly, packing/metacost.py); never for an audit's counter, which recounts."""
        return self._proven

    def load_on_first_miss(self, load: Callable[[LineCounter], object]) -> None:
        """Call `load(self)` (which primes this counter) just before the first line that
        neither cache holds is tokenized; never, if every line asked for is cached. A warm
        process then skips forecasting a pack's lines for storage it would not need."""
        self._on_first_miss = load

    def cached_cost(self, line: str) -> int | None:
        cost = self._cache.get(line)
        return self._loaded.get(line) if cost is None else cost

    def lower_bound(self, text: str) -> int:
        """A cheap floor on the cost of any line that shows `text` as a JSON string.

        No token spans more than max_token_chars bytes, and no token spans two word runs.
        Remembered per text for the process, like line costs: a warm pack looks it up.
        """
        if self.max_token_chars is None:
            return 0  # a tokenizer.json vocabulary gives no byte bound
        floors = self._floors
        got = floors.get(text)
        if got is None:
            by_length = -(-(len(text) + 1) // self.max_token_chars)
            got = max(by_length, word_runs(text))
            # Bounded in entries and characters: the memo must stay small however many
            # distinct (or huge) records a process packs.
            size = len(text)
            if size <= _FLOOR_TEXT_CHARS:
                held = self._floor_chars
                if not floors:
                    held[0] = 0  # emptied from outside (clear_line_cache)
                while floors and (len(floors) >= _FLOOR_LIMIT
                                  or held[0] + size > _FLOOR_CHARS):
                    for key in list(floors)[: max(len(floors) // 4, 1)]:  # the oldest quarter
                        floors.pop(key, None)
                    # Recounted, not decremented: threads racing on one text may both have
                    # added its size, and the count must not drift.
                    held[0] = sum(map(len, list(floors)))
                if text not in floors:
                    floors[text] = got
                    held[0] += size
        return got

    def lower_bounds(self, texts: Iterable[str]) -> list[int]:
        """[lower_bound(t) for t in texts], reading remembered floors straight off the memo:
        a warm pack asks for one per candidate."""
        remembered, lower_bound = self._floors.get, self.lower_bound
        return [floor if (floor := remembered(text)) is not None else lower_bound(text)
                for text in texts]

    def unseen(self, lines: Iterable[str]) -> list[str]:
        """The distinct lines among `lines` whose cost is not cached yet, in first-seen order."""
        cache, loaded = self._cache, self._loaded
        return list(dict.fromkeys(line for line in lines
                                  if line not in cache and line not in loaded))

    def prime(self, costs: Iterable[tuple[str, int]]) -> None:
        """Add line costs loaded from storage: checked against cost_bounds, kept for this
        counter only, and never taken as proof (a pack that uses one counts its output)."""
        for line, cost in costs:
            low, high = cost_bounds(line, self.max_token_chars)
            if isinstance(cost, int) and low <= cost <= high:
                self._loaded[line] = cost
            else:
                self.rejected[line] = cost  # impossible: the tokenizer counts it instead

    def _remember_tokenized(self, costs: Iterable[tuple[str, int]]) -> None:
        """Add costs the tokenizer just computed (bulk costing, in this process or its
        workers): they join the process-wide cache, which sums_exactly trusts. Private to
        the package, so no caller can slip a cost that the tokenizer did not make into it."""
        for line, cost in costs:
            self._remember(line, cost)
            if self._fresh is not None:
                self._fresh[line] = cost

    def take_fresh(self) -> dict[str, int]:
        """The lines tokenized since the last call, with their costs (record=True only)."""
        fresh = self._fresh or {}
        if self._fresh is not None:
            self._fresh = {}
        return fresh

    def exact(self, line: str) -> int:
        """Tokenize `line + "\\n"` now, whatever any cache says."""
        return len(self._encode(line + "\n"))

    def loaded_cost(self, line: str) -> int | None:
        return self._loaded.get(line)

    def _remember(self, line: str, cost: int) -> None:
        size = sys.getsizeof(line) + _ENTRY_OVERHEAD
        if size > CACHE_BYTES // 8 or not self._shared:
            if not self._shared:
                self._cache[line] = cost
            return
        with _CACHES_LOCK:
            cache, enc = self._cache, self.encoding
            if line in cache:
                return
            total = _CACHE_SIZES.get(enc, 0) + size
            if total > CACHE_BYTES:
                # Drop the oldest quarter of the bytes; dicts iterate in insertion order.
                target = CACHE_BYTES * 3 // 4 - size
                for key in list(cache):
                    if total <= target:
                        break
                    if cache.pop(key, None) is not None:
                        total -= sys.getsizeof(key) + _ENTRY_OVERHEAD
            cache[line] = cost
            _CACHE_SIZES[enc] = total


def clear_line_cache() -> None:
    """Forget every cached line cost (tests use it to measure the cold path)."""
    with _CACHES_LOCK:
        for cache in (*_CACHES.values(), *_FLOORS.values(), *_SHORT.values(),
                      *_DERIVED.values()):
            cache.clear()
        for joined in _JOINED.values():
            joined.clear()
        _CACHE_SIZES.clear()


def _scanner(encoding: str):
    """The encoding's pre-tokenizer pattern, compiled (None where the encoding has none)."""
    if encoding not in _SCANNERS:
        import regex  # tiktoken's own dependency, for its \p{...} classes

        pattern = getattr(get_encoding(encoding), "_pat_str", None)
        _SCANNERS[encoding] = regex.compile(pattern) if isinstance(pattern, str) else None
    return _SCANNERS[encoding]

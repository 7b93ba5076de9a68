"""Bulk exact token costing: many texts at once, across processes when the batch is large.

tiktoken holds the GIL while it encodes, so threads do not help (measured: 0.7-0.8x on
two threads). Large batches are split between this process and a pool of worker
processes; small ones stay in process, where a pool's hand-off would cost more than it saves.
The counts are the same either way: each worker runs the same encoding (verified offline,
see encodings.py) on the same text.

Workers start with the "forkserver" method, because forking a process that runs DuckDB
threads is unsafe. Like any multiprocessing user, a script that reaches the pool needs an
`if __name__ == "__main__":` guard; if the pool cannot start, costing falls back to this
process and gives the same counts.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import threading
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool

from .encodings import _REGISTERED_FILES, get_encoding, register_bpe_file
from .tokens import LineCounter

# Below this many characters a batch stays in process: about 50K tokens, tens of
# milliseconds of encoding, against a few milliseconds of hand-off to a worker.
DEFAULT_THRESHOLD_CHARS = 200_000

_POOL: ProcessPoolExecutor | None = None
_POOL_SIZE = 0
_POOL_LOCK = threading.Lock()


def default_processes() -> int:
    """Processes to use for large batches: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def cost_texts(texts: Sequence[str], encoding: str = "cl100k_base", *,
               processes: int | None = None,
               threshold_chars: int = DEFAULT_THRESHOLD_CHARS) -> list[int]:
    """Exact token count of each text (special-token spellings counted as ordinary text).

    Args:
        texts: the texts, in order.
        encoding: a tiktoken encoding name.
        processes: processes to share the work (this one included); None uses every core,
            1 stays in process.
        threshold_chars: batches with fewer characters stay in process.

    Returns:
        len(encode_ordinary(text)) for each text, in input order.

    >>> cost_texts(["hello world", "<|endoftext|>"])
    [2, 7]
    """
    return _cost(list(texts), encoding, "", processes, threshold_chars)


def cost_lines(lines: Sequence[str], encoding: str = "cl100k_base", *,
               processes: int | None = None,
               threshold_chars: int = DEFAULT_THRESHOLD_CHARS) -> list[int]:
    """Exact cost of each context line, newline included: what LineCounter.line_cost gives."""
    return _cost(list(lines), encoding, "\n", processes, threshold_chars)


def warm_counter(counter: LineCounter, lines: Iterable[str], *, processes: int | None = None,
                 threshold_chars: int = DEFAULT_THRESHOLD_CHARS) -> int:
    """Cost the lines the counter has not seen, together, and cache them. Returns how many."""
    unseen = counter.unseen(lines)
    if unseen:
        costs = cost_lines(unseen, counter.encoding, processes=processes,
                           threshold_chars=threshold_chars)
        counter.prime(zip(unseen, costs), fresh=True)
    return len(unseen)


def start_pool(processes: int | None = None, encoding: str = "cl100k_base") -> int:
    """Start the worker pool now (it otherwise starts with the first large batch).

    Returns the number of worker processes (processes - 1: this process works too).
    """
    workers = (processes or default_processes()) - 1
    if workers < 1:
        return 0
    pool = _pool(workers)
    # Load the encoding in every worker, so the first timed batch does not pay for it.
    list(pool.map(_load, [encoding] * workers * 2))
    return workers


def shutdown_pool() -> None:
    """Stop the worker processes (registered to run at exit)."""
    global _POOL, _POOL_SIZE
    with _POOL_LOCK:
        pool, _POOL, _POOL_SIZE = _POOL, None, 0
    if pool is not None:
        pool.shutdown(wait=True, cancel_futures=True)


def _cost(texts: list[str], encoding: str, suffix: str, processes: int | None,
          threshold_chars: int) -> list[int]:
    encode = get_encoding(encoding).encode_ordinary  # fail here, clearly, on a bad name
    processes = default_processes() if processes is None else max(1, int(processes))
    if processes == 1 or len(texts) < 2 * processes:
        return [len(encode(t + suffix)) for t in texts]
    if sum(map(len, texts)) < threshold_chars:
        return [len(encode(t + suffix)) for t in texts]
    try:
        return _cost_in_pool(texts, encoding, suffix, processes, encode)
    except Exception as exc:  # noqa: BLE001 - any pool failure: same counts, in process
        if isinstance(exc, BrokenProcessPool):
            shutdown_pool()
        warnings.warn(f"rms_duck: token costing fell back to one process ({exc})",
                      RuntimeWarning, stacklevel=3)
        return [len(encode(t + suffix)) for t in texts]


def _cost_in_pool(texts: list[str], encoding: str, suffix: str, processes: int,
                  encode) -> list[int]:
    """This process takes the first share; each worker one of the others."""
    bounds = _split(texts, processes)
    pool = _pool(processes - 1)
    bpe_file = _REGISTERED_FILES.get(encoding)
    futures = [pool.submit(_cost_chunk, texts[lo:hi], encoding, suffix, bpe_file)
               for lo, hi in bounds[1:]]
    lo, hi = bounds[0]
    out = [len(encode(t + suffix)) for t in texts[lo:hi]]
    for future in futures:
        out.extend(future.result())
    return out


def _split(texts: list[str], parts: int) -> list[tuple[int, int]]:
    """Contiguous ranges with about the same number of characters each."""
    total = sum(map(len, texts))
    bounds, start, seen = [], 0, 0
    for i, text in enumerate(texts):
        seen += len(text)
        if len(bounds) < parts - 1 and seen >= total * (len(bounds) + 1) / parts:
            bounds.append((start, i + 1))
            start = i + 1
    bounds.append((start, len(texts)))
    return bounds + [(len(texts), len(texts))] * (parts - len(bounds))


def _pool(workers: int) -> ProcessPoolExecutor:
    global _POOL, _POOL_SIZE
    with _POOL_LOCK:
        if _POOL is None or _POOL_SIZE != workers:
            if _POOL is not None:
                _POOL.shutdown(wait=False, cancel_futures=True)
            _POOL = ProcessPoolExecutor(
                max_workers=workers, mp_context=multiprocessing.get_context("forkserver"))
            _POOL_SIZE = workers
        return _POOL


def _load(encoding: str) -> int:
    return get_encoding(encoding).n_vocab


def _cost_chunk(texts: list[str], encoding: str, suffix: str, bpe_file=None) -> list[int]:
    if bpe_file is not None and _REGISTERED_FILES.get(encoding) != bpe_file:
        register_bpe_file(encoding, bpe_file)  # the parent's registration, seen by this worker
    encode = get_encoding(encoding).encode_ordinary
    return [len(encode(t + suffix)) for t in texts]


atexit.register(shutdown_pool)

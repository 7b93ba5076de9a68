"""Bulk exact token costing: many texts at once, across processes when the batch is large.

tiktoken holds the GIL while it encodes, so threads do not help (measured: 0.7-0.8x on
two threads). A large batch is split by characters: this process encodes the first share
while worker processes encode the others. Small batches stay in process, where handing
texts to a worker would cost more than it saves. The counts are the same either way: a
worker loads the same encoding, verified against the same sha256 (encodings.py).

Workers are plain `python -m rms_duck.tokens.worker` subprocesses fed length-prefixed pickles over
their stdin. Unlike multiprocessing's spawn and forkserver methods they never re-import
the caller's __main__ (so a script without an `if __name__ == "__main__"` guard is safe,
even when the batch arrives through a SQL statement), and unlike fork they do not copy a
process that runs DuckDB threads. If a worker cannot start or dies, costing falls back to
this process, with a RuntimeWarning, and gives the same counts.
"""

from __future__ import annotations

import atexit
import importlib
import os
import pickle
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO, Any, BinaryIO

from ..errors import ConfigError
from .counter import LineCounter
from .encodings import DEFAULT_ENCODING, apply_registrations, get_encoding, registrations
from .turns import Turns

# Below this many characters a batch stays in process: about 50K tokens, tens of
# milliseconds of encoding, against a few milliseconds of hand-off to a worker.
DEFAULT_THRESHOLD_CHARS = 200_000

_WORKERS: list[_Worker] = []
_POOL_LOCK = threading.RLock()
_TURNS = Turns()  # batches packing on the workers (held_workers), in the order they came
_INHERITED: list[_Worker] = []  # a forked child's copies of its parent's workers (_forked)


def check_count(name: str, value: object, fix: str) -> None:
    """`value` is None or a whole number >= 1 (processes, threshold_chars): a text or a
    negative count was taken as it was, and failed only once a batch was large enough to
    use it ("unsupported operand type(s) for -: 'str' and 'int'")."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
        return
    raise ConfigError(f"{name} must be a whole number >= 1 or None, got {value!r}; {fix}")


def default_processes() -> int:
    """Processes to use for large batches: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def cost_texts(texts: Sequence[str], encoding: str = DEFAULT_ENCODING, *,
               processes: int | None = None,
               threshold_chars: int | None = None) -> list[int]:
    """Exact token count of each text (special-token spellings counted as ordinary text).

    Args:
        texts: the texts, in order.
        encoding: an encoding name (encodings.known_encodings()).
        processes: processes to share the work (this one included); None uses every core,
            1 stays in process.
        threshold_chars: batches with fewer characters stay in process (default
            DEFAULT_THRESHOLD_CHARS).

    Returns:
        len(encode_ordinary(text)) for each text, in input order.

    >>> cost_texts(["hello world", "<|endoftext|>"])
    [2, 7]
    """
    return _cost(list(texts), encoding, "", processes, threshold_chars)


def cost_lines(lines: Sequence[str], encoding: str = DEFAULT_ENCODING, *,
               processes: int | None = None,
               threshold_chars: int | None = None) -> list[int]:
    """Exact cost of each context line, newline included: what LineCounter.line_cost gives."""
    return _cost(list(lines), encoding, "\n", processes, threshold_chars)


def warm_counter(counter: LineCounter, lines: Iterable[str], *, processes: int | None = None,
                 threshold_chars: int | None = None) -> int:
    """Cost the lines the counter has not seen, together, and cache them. Returns how many."""
    unseen = counter.unseen(lines)
    if unseen:
        costs = cost_lines(unseen, counter.encoding, processes=processes,
                           threshold_chars=threshold_chars)
        counter._remember_tokenized(zip(unseen, costs, strict=False))
    return len(unseen)


def start_pool(processes: int | None = None, encoding: str = DEFAULT_ENCODING) -> int:
    """Start the workers now (they otherwise start with the first large batch) and load
    `encoding` in each. Returns the number of workers (processes - 1: this one works too)."""
    with held_workers((processes or default_processes()) - 1) as workers:
        assert workers is not None  # held_workers waits
        for worker in workers:
            worker.send((encoding, "", registrations(), []))
        for worker in workers:
            worker.receive()
        return len(workers)


def shutdown_pool(*, kill: bool = False) -> None:
    """Stop the worker processes (registered to run at exit). kill=True stops them at once,
    for a pool given up mid-request: a busy worker would otherwise finish its request first."""
    with _POOL_LOCK:
        # Each leaves _WORKERS once closed: a child forked meanwhile orphans the others.
        while _WORKERS:
            _WORKERS[0].close(kill=kill)
            del _WORKERS[0]


def _cost(texts: list[str], encoding: str, suffix: str, processes: int | None,
          threshold_chars: int | None) -> list[int]:
    encode = get_encoding(encoding).encode_ordinary  # fail here, clearly, on a bad name
    processes = default_processes() if processes is None else max(1, int(processes))
    if threshold_chars is None:
        threshold_chars = DEFAULT_THRESHOLD_CHARS
    if processes == 1 or len(texts) < 2 * processes or sum(map(len, texts)) < threshold_chars:
        return [len(encode(t + suffix)) for t in texts]
    # One batch at a time owns the workers' pipes. While another thread's batch packs on
    # them (parallel.py, seconds for a large GROUP BY), costing here is sooner than waiting.
    lock = _POOL_LOCK  # this one, even if a fork replaces it meanwhile (_forked)
    if not lock.acquire(blocking=False):
        return [len(encode(t + suffix)) for t in texts]
    try:
        try:
            return _cost_in_pool(texts, encoding, suffix, processes, encode)
        except BaseException:
            shutdown_pool(kill=True)  # a reply may be left unread: the next batch starts afresh
            raise
        finally:
            lock.release()
    except Exception as exc:
        warnings.warn(f"rms_duck: token costing fell back to one process ({exc!r})",
                      RuntimeWarning, stacklevel=3)
        return [len(encode(t + suffix)) for t in texts]


def _cost_in_pool(texts: list[str], encoding: str, suffix: str, processes: int,
                  encode) -> list[int]:
    """This process takes the first share; each worker one of the others."""
    bounds = _split(texts, processes)
    workers = _workers(processes - 1)
    registered = registrations()
    for worker, (lo, hi) in zip(workers, bounds[1:], strict=False):
        worker.send((encoding, suffix, registered, texts[lo:hi]))
    lo, hi = bounds[0]
    out = [len(encode(t + suffix)) for t in texts[lo:hi]]
    for worker in workers:
        out.extend(worker.receive())
    if len(out) != len(texts):
        raise ValueError(f"workers returned {len(out)} counts for {len(texts)} texts")
    return out


def _split(texts: list[str], parts: int) -> list[tuple[int, int]]:
    """Contiguous ranges with about the same number of characters each."""
    total = sum(map(len, texts))
    bounds: list[tuple[int, int]] = []
    start = seen = 0
    for i, text in enumerate(texts):
        seen += len(text)
        if len(bounds) < parts - 1 and seen >= total * (len(bounds) + 1) / parts:
            bounds.append((start, i + 1))
            start = i + 1
    bounds.append((start, len(texts)))
    return bounds + [(len(texts), len(texts))] * (parts - len(bounds))


def _workers(count: int) -> list[_Worker]:
    with _POOL_LOCK:
        for dead in [w for w in _WORKERS if not w.alive()]:
            dead.close()  # its pipes, which would otherwise stay open until collected
            _WORKERS.remove(dead)
        while len(_WORKERS) < count:
            _WORKERS.append(_Worker())
        return _WORKERS[:count]


class _Worker:
    """One `python -m rms_duck.tokens.worker` subprocess and the pipes to it."""

    def __init__(self) -> None:
        env = dict(os.environ)
        # The child finds rms_duck (and its BPE files) where this process found them.
        env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
        # Ctrl-C in a terminal reaches the worker too, and may come before it has set
        # itself to ignore SIGINT (worker.py, once Python has started and imported
        # rms_duck): it starts with SIGINT blocked, as this thread has it meanwhile.
        masked = hasattr(signal, "pthread_sigmask")
        if masked:
            kept = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            # -P: `python -m` would put the current directory first on the child's path,
            # so a struct.py (or rms_duck/) lying there ran in every worker.
            self.proc = subprocess.Popen([sys.executable, "-P", "-m", "rms_duck.tokens.worker"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         env=env)
        finally:
            if masked:
                signal.pthread_sigmask(signal.SIG_SETMASK, kept)
        assert self.proc.stdin is not None and self.proc.stdout is not None  # both are PIPEs
        self.stdin, self.stdout = self.proc.stdin, self.proc.stdout

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, request: Any) -> None:
        _write(self.stdin, request)

    def receive(self) -> Any:
        reply = _read(self.stdout)
        if isinstance(reply, BaseException):
            raise reply
        return reply

    def close(self, *, kill: bool = False) -> None:
        if kill:
            self.proc.kill()
        for stream in (self.stdin, self.stdout):
            try:
                stream.close()
            except OSError:  # a dead worker's pipe: the flush of stdin finds it broken
                pass
        try:
            self.proc.wait(timeout=5)  # an idle worker exits at once on end of input
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def orphan(self) -> None:
        """In a forked child: point this copy's pipe ends at /dev/null, so the child neither
        holds the parent's worker open nor can write into its requests (a flush of a
        half-written request, copied by the fork, goes nowhere)."""
        null = os.open(os.devnull, os.O_RDWR)
        try:
            for stream in (self.stdin, self.stdout):
                if not stream.closed:  # closed by the parent just before the fork
                    os.dup2(null, stream.fileno())
        finally:
            os.close(null)


def _write(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(len(data).to_bytes(8, "little"))
    stream.write(data)
    stream.flush()


def _read(stream: IO[bytes]) -> Any:
    header = stream.read(8)
    if len(header) < 8:
        raise EOFError("a token-costing worker exited")
    size = int.from_bytes(header, "little")
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("a token-costing worker exited mid-reply")
    return pickle.loads(data)


@contextmanager
def held_workers(count: int, *, behind: int | None = None,
                 start: bool = True) -> Iterator[list[_Worker] | None]:
    """`count` workers for a caller's own requests (call_request), in turn: first come,
    first served (turns.py). While other batches use them or wait for them, wait for this
    one's turn; or, with `behind` set, get None at once when more batches than that are
    ahead, or when bulk costing holds the pool at this one's turn. With start=False, get
    None when fewer than `count` run (a batch before stopped them). A failure inside stops
    the pool, so the next batch starts on pipes with no reply left unread."""
    turns, lock = _TURNS, _POOL_LOCK  # these, even if a fork replaces them meanwhile
    token = None
    try:
        token = turns.take(behind)
        # A caller that may not wait does not wait for bulk costing either (_cost).
        if token is None or not lock.acquire(blocking=behind is None):
            yield None
            return
        try:
            yield _workers(count) if start or started_workers() >= count else None
        except BaseException:
            shutdown_pool(kill=True)
            raise
        finally:
            lock.release()
    finally:
        # Not in a child forked meanwhile: its queue is a new one, and the old one's lock
        # may have been copied held by a thread that does not exist there.
        if token is not None and turns is _TURNS:
            turns.done(token)


def started_workers() -> int:
    """How many workers are running now (a batch sent to them pays no start). Read without
    the pool's lock, which a batch holds while the workers pack."""
    return sum(worker.alive() for worker in list(_WORKERS))


def call_request(function: str, *args: Any) -> tuple[str, dict[str, Any], str, tuple]:
    """A request that runs `function` ("package.module:name", imported in the worker) on
    `args` after repeating this process's encoding registrations. The worker layer knows
    no packing: the packer names its own function."""
    return (_CALL, registrations(), function, args)


def receive_reply(worker: _Worker) -> Any:
    """A worker's reply as sent: a value, or the exception its call raised."""
    return _read(worker.stdout)


_CALL = "rms_duck:call"  # no encoding has this name: a costing request starts with one


def serve(stdin: BinaryIO, stdout: BinaryIO) -> None:
    """The worker loop: (encoding, suffix, registrations, texts) in, counts (or the error)
    out; or a call_request(), whose function's return value (or error) goes out."""
    while True:
        try:
            request = _read(stdin)
        except EOFError:
            return
        try:
            reply: Any
            if request[0] == _CALL:
                _, registered, function, args = request
                apply_registrations(registered)
                module, _, name = function.partition(":")
                reply = getattr(importlib.import_module(module), name)(*args)
            else:
                encoding, suffix, registered, texts = request
                apply_registrations(registered)  # the parent's registered files
                encode = get_encoding(encoding).encode_ordinary
                reply = [len(encode(t + suffix)) for t in texts]
        except Exception as exc:  # noqa: BLE001 - the parent re-raises it
            reply = exc
        try:
            _write(stdout, reply)
        except (BrokenPipeError, ValueError):  # the parent stopped the pool mid-request
            return


def _forked() -> None:
    """In a child forked from this process: the pool's lock and turns may have been copied
    held by a thread that does not exist here, and the workers are the parent's. Start afresh."""
    global _POOL_LOCK, _TURNS
    _POOL_LOCK = threading.RLock()
    _TURNS = Turns()
    for worker in _WORKERS:
        worker.orphan()
    _INHERITED.extend(_WORKERS)  # kept, so no collection closes or waits on them
    _WORKERS[:] = []


atexit.register(shutdown_pool)
if hasattr(os, "register_at_fork"):  # POSIX; Windows has no fork
    os.register_at_fork(after_in_child=_forked)

"""A large batch of bundles packed across processes: this one and the costing workers.

The packer is Python, so threads only take turns for the GIL; a GROUP BY of thousands of
bundles gains from other cores only through processes. pack_lists() hands each worker
(tokens/bulk.py, already started for bulk costing) a contiguous share of the rows as Arrow
IPC and packs the first share itself; each side runs the same pack_lists() on one process,
so the bundles are the same bytes as packed here, and errors come in row order: the first
share's before any worker's, then the workers' in turn.

Only batches whose every config uses a built-in format go out (a format registered in
this process does not exist in a worker), and only when no line_costs were given. What a
share logs in a worker (a BUDGET_OVERFLOW warning) reaches this process's loggers, in row
order, as if it had been packed here.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ..config import PackingConfig, parse_config
from ..errors import EncodingUnavailableError, RmsError
from ..formats import FORMATS
from ..formats.base import _BUILTIN, clear_render_memos
from ..tokens import bulk
from ..tokens.counter import clear_line_cache

if TYPE_CHECKING:
    import pyarrow as pa

# Bundles and candidates below which a batch stays in this process: a first use's worker
# start (about 0.4 s) must pay off; once they run, the hand-off (Arrow IPC both ways, a
# pickle each) costs a few milliseconds, and smaller batches go out too.
MIN_BUNDLES = 1_024
MIN_CANDIDATES = 8_192
MIN_BUNDLES_STARTED = 256
MIN_CANDIDATES_STARTED = 2_048

_PACK_PART = "rms_duck.packing.parallel:pack_part"
_LOGGED_CALL = "rms_duck.packing.parallel:logged_call"
_LOGGER = "rms_duck"
_ONE_PROCESS = [0]  # one_process() blocks entered and not yet left


@contextmanager
def one_process() -> Iterator[None]:
    """Within it, every batch packs in this process (keep the other cores free, or measure
    what one process does: rms-duck bench reports both)."""
    _ONE_PROCESS[0] += 1
    try:
        yield
    finally:
        _ONE_PROCESS[0] -= 1


def pack_in_parts(candidates: pa.ChunkedArray, budgets: Sequence[Any],
                  configs: Sequence[Any], *, inputs: bool,
                  processes: int) -> pa.Array | None:
    """pack_lists() of the whole batch, its rows shared among `processes` processes; None
    when the batch is small or uses a format of this process only (the caller then packs
    it here)."""
    import pyarrow as pa

    parts = in_parts(candidates, [budgets, configs], configs=configs, processes=processes,
                     function=_PACK_PART, here=lambda part, columns: _pack_here(
                         part, columns[0], columns[1], inputs), extra=(inputs,),
                     decode=from_ipc)
    return None if parts is None else pa.concat_arrays(parts)


def in_parts(candidates: pa.ChunkedArray, columns: Sequence[Sequence[Any]], *,
             configs: Sequence[Any], processes: int, function: str,
             here: Callable[[Any, list[list[Any]]], Any], extra: tuple[Any, ...] = (),
             decode: Callable[[Any], Any] = lambda reply: reply,
             meanwhile: Callable[[Any], None] | None = None) -> list[Any] | None:
    """The batch's rows in contiguous shares: the first through `here(candidates, columns)`
    in this process, each other by `function` ("module:name") in a worker, called with the
    share's candidates as Arrow IPC, its slice of each column and `extra`; each worker's
    result goes through `decode`. Returns the shares' results in row order, or None when
    the batch stays here (see pack_in_parts). A share's RmsError is raised in row order
    once every reply is read; a worker that fails otherwise has its share done here.

    `meanwhile(result)`, when given, is called with the first share's result as soon as
    it is done, before the workers' replies are read: this process works on it while the
    workers finish theirs. It must not raise for a reason the batch should stop on."""
    if _ONE_PROCESS[0]:
        return None
    started = bulk.started_workers() >= processes - 1
    bundles, least = (MIN_BUNDLES_STARTED, MIN_CANDIDATES_STARTED) if started else (
        MIN_BUNDLES, MIN_CANDIDATES)
    count = _candidates(candidates)
    if processes < 2 or len(candidates) < bundles or count < least:
        return None
    # Batches take turns at the workers, first come, first served (bulk.held_workers). A
    # large batch waits for its turn. A medium one (too small to pay for starting them)
    # waits only behind the batch holding them: packing here beside that batch's own share
    # would only share this process's GIL with it, and the workers would then idle (a
    # 2-thread GROUP BY's last calls). Behind a queue it packs here at once, so a call on
    # another connection never waits for a whole GROUP BY.
    large = len(candidates) >= MIN_BUNDLES and count >= MIN_CANDIDATES
    if not all(_portable(raw) for raw in dict.fromkeys(map(_hashable, configs))):
        return None
    bounds = _shares(candidates, processes)

    def share(lo: int, hi: int) -> tuple[Any, list[list[Any]]]:
        return candidates.slice(lo, hi - lo), [list(column[lo:hi]) for column in columns]

    error: RmsError | None = None
    level = logging.getLogger(_LOGGER).getEffectiveLevel()
    sent = False
    try:
        # A medium batch does not start workers the batch it waited behind stopped.
        with bulk.held_workers(len(bounds) - 1, behind=None if large else 1,
                               start=large) as workers:
            if workers is None:
                return None
            for worker, (lo, hi) in zip(workers, bounds[1:], strict=True):
                part, sliced = share(lo, hi)
                worker.send(bulk.call_request(_LOGGED_CALL, function, level, _to_ipc(part),
                                              *sliced, *extra))
            sent = True
            try:
                results = [here(*share(*bounds[0]))]
            except RmsError as exc:  # bad input: raised once every reply is read
                error, results = exc, []
            if meanwhile is not None and results:
                meanwhile(results[0])
            # Anything else (Ctrl-C) leaves held_workers, which kills the pool at once
            # rather than wait for replies nobody will read.
            replies = [_reply(worker) for worker in workers]  # pipes stay in step
            if any(isinstance(reply, _DIED) for reply in replies):
                bulk.shutdown_pool(kill=True)  # within the hold: no batch is using them
    except Exception as exc:
        if sent:
            raise
        # No worker could start or take the request (held_workers stopped the pool).
        warnings.warn(f"rms_duck: packing stays in one process ({exc!r})", RuntimeWarning,
                      stacklevel=3)
        return None
    for (lo, hi), reply in zip(bounds[1:], replies, strict=True):
        if error is not None:
            break
        if isinstance(reply, EncodingUnavailableError) or (
                isinstance(reply, BaseException) and not isinstance(reply, RmsError)):
            # A worker that died, or cannot load an encoding this process has (a registered
            # BPE file moved since): the share is packed here, where it can be. What this
            # process cannot pack either (an encoding no process has) raises here, in row
            # order, as in one process: the warning is only for a share packed here.
            results.append(here(*share(lo, hi)))
            warnings.warn(f"rms_duck: a packing worker failed ({reply!r}); its bundles were "
                          "packed in this process", RuntimeWarning, stacklevel=3)
        elif isinstance(reply, RmsError):
            _replay(vars(reply).pop("log_records", ()))  # what its rows logged before it
            if "group_row" in vars(reply):  # its row in the share: in the whole batch
                reply.group_row += lo  # type: ignore[attr-defined]
            error = reply  # the first share in row order that failed
        else:
            _replay(reply[1])
            results.append(decode(reply[0]))
    if error is not None:
        raise error
    return results


def logged_call(function: str, level: int, *args: Any) -> tuple[Any, list[logging.LogRecord]]:
    """In a worker: `function(*args)` and what it logged at `level` or above on the
    rms_duck logger (the caller's level), for the caller to replay. An error carries its
    share's records too, in `log_records`."""
    import importlib

    module, _, name = function.partition(":")
    logger = logging.getLogger(_LOGGER)
    records = _Records()
    records.setLevel(level)
    kept = logger.level, logger.propagate
    logger.setLevel(level or logging.DEBUG)  # NOTSET here would defer to this root's level
    logger.propagate = False  # the caller's handlers show them, not this worker's stderr
    logger.addHandler(records)
    try:
        return getattr(importlib.import_module(module), name)(*args), records.records
    except Exception as exc:
        exc.log_records = records.records  # type: ignore[attr-defined]
        raise
    finally:
        logger.removeHandler(records)
        logger.setLevel(kept[0])
        logger.propagate = kept[1]


class _Records(logging.Handler):
    """Keeps each record, its message formatted (arguments need not pickle)."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        record.msg, record.args = record.getMessage(), None
        record.exc_info = record.exc_text = None
        self.records.append(record)


def _replay(records: Sequence[logging.LogRecord]) -> None:
    """A worker's records, through this process's loggers as if logged here."""
    for record in records:
        logger = logging.getLogger(record.name)
        if logger.isEnabledFor(record.levelno):
            logger.handle(record)


def pack_part(ipc: bytes, budgets: list[Any], configs: list[Any], inputs: bool) -> bytes:
    """In a worker: pack_lists() of the rows sent, the bundles back as Arrow IPC."""
    return _to_ipc(_pack_here(from_ipc(ipc), budgets, configs, inputs))


def clear_caches() -> None:
    """In a worker: forget costed and rendered lines, as a cold pack here does."""
    clear_line_cache()
    clear_render_memos()


def warm_up() -> int:
    """In a worker: pack one small batch through a share's own path (Arrow IPC in and out,
    the columnar intake, the reader's date and speaker lines), then forget what it cached.
    Returns how many modules it imported. A worker's first share otherwise paid these
    imports and first uses itself: 1.1 s against 0.55 s for the same 1,024 bundles."""
    import sys
    from datetime import UTC, datetime

    import pyarrow as pa

    before = len(sys.modules)
    when = datetime(2024, 5, 28, 9, 30, tzinfo=UTC)
    rows = [{"id": f"warm-{i}", "score": 0.5, "content": f"A short record number {i}.",
             "event_time": when, "speaker": "Ada"} for i in range(3)]
    from_ipc(pack_part(_to_ipc(pa.array([rows, rows[:1]])), [512, 512], [None, None], True))
    clear_caches()
    return len(sys.modules) - before


def warm_workers() -> int:
    """Have every started worker run warm_up(); returns how many were warmed. For timing
    the packing of shares apart from the workers' start (rms-duck bench)."""
    replies = _in_each_worker("rms_duck.packing.parallel:warm_up")
    for reply in replies:
        if isinstance(reply, BaseException):
            raise reply
    return len(replies)


def clear_worker_caches() -> None:
    """Empty the line and render caches of every worker (the bench's cold runs)."""
    _in_each_worker("rms_duck.packing.parallel:clear_caches")


def _in_each_worker(function: str) -> list[Any]:
    """`function` ("module:name") called in every started worker; their replies."""
    with bulk.held_workers(bulk.started_workers()) as workers:
        for worker in workers or ():
            worker.send(bulk.call_request(function))
        return [bulk.receive_reply(worker) for worker in workers or ()]


def _pack_here(candidates: Any, budgets: Sequence[Any], configs: Sequence[Any],
               inputs: bool) -> pa.Array:
    from .batches import pack_lists

    return pack_lists(candidates, list(budgets), list(configs), inputs=inputs, processes=1)


_DIED = (EOFError, OSError)  # what reading the reply of a worker that died raises


def _reply(worker: Any) -> Any:
    try:
        return bulk.receive_reply(worker)
    except _DIED as exc:  # its share is packed here
        return exc


def _portable(raw: Any) -> bool:
    """True when a worker packs this config as this process does: a config that does not
    parse stays here, so its error is raised in row order by the usual path."""
    try:
        config = raw if isinstance(raw, PackingConfig) else parse_config(raw)
    except RmsError:
        return False
    fmt = FORMATS.get(config.context_format)
    return fmt is not None and type(fmt) in _BUILTIN


def _hashable(raw: Any) -> Any:
    return raw if isinstance(raw, (str, PackingConfig)) or raw is None else repr(raw)


def _candidates(candidates: pa.ChunkedArray) -> int:
    return sum(len(chunk.values) for chunk in candidates.chunks)


def _shares(candidates: pa.ChunkedArray, parts: int) -> list[tuple[int, int]]:
    """Contiguous row ranges with about the same number of candidates each."""
    import pyarrow.compute as pc

    sizes = pc.fill_null(pc.list_value_length(candidates), 0).to_pylist()
    total = sum(sizes)
    bounds: list[tuple[int, int]] = []
    start = seen = 0
    for i, size in enumerate(sizes):
        seen += size
        if len(bounds) < parts - 1 and seen >= total * (len(bounds) + 1) / parts:
            bounds.append((start, i + 1))
            start = i + 1
    bounds.append((start, len(sizes)))
    return [(lo, hi) for lo, hi in bounds if hi > lo] or [(0, len(sizes))]


def _to_ipc(array: Any) -> bytes:
    import pyarrow as pa

    table = pa.table({"c": array})
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes) -> Any:
    """The column _to_ipc() wrote, as one Arrow array."""
    import pyarrow as pa

    column = pa.ipc.open_stream(data).read_all().column("c")
    return column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)

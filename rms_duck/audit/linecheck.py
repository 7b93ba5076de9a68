"""check_line_costs(): recount the rms_line_costs rows whose line can be rebuilt.

A row stores a line's digest, not its text, so a row can be recounted only when its line is
found again. Two sources cover what packs cost: replaying every stored bundle with a
private recording counter gives every line those packs tokenized or looked up, and
rendering every node in every format gives what the ingest pass stores. Rows no source
rebuilds are counted as unchecked (they can only matter to a pack that renders that line,
and such a pack checks the cost it uses). Reads only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import duckdb

from ..config import parse_config
from ..duck.cursors import audit_cursor, check_connection, explains_setup
from ..duck.linecosts import _node_batches, encoding_key, line_sha256
from ..errors import RmsError
from ..formats import FORMATS
from ..packing.forecast import standalone_lines
from ..packing.repack import repack
from ..tokens.counter import LineCounter


@dataclass(frozen=True, slots=True)
class WrongCost:
    encoding: str
    line_sha256: str
    stored: int
    exact: int


@dataclass(frozen=True, slots=True)
class LineCostCheck:
    """rows stored, rows recounted, and the wrong ones (empty when the cache is sound)."""

    rows: int
    checked: int
    wrong: tuple[WrongCost, ...]

    @property
    def ok(self) -> bool:
        return not self.wrong


@explains_setup("rms_duck.check_line_costs")
def check_line_costs(con: duckdb.DuckDBPyConnection) -> LineCostCheck:
    """Recount every rms_line_costs row whose line a stored bundle or a node rebuilds."""
    check_connection(con, "rms_duck.check_line_costs")
    cur = audit_cursor(con)
    try:
        stored = {(key, digest): n for key, digest, n in cur.execute(
            "SELECT encoding, line_sha256, n_tokens FROM rms_line_costs").fetchall()}
        if not stored:
            return LineCostCheck(0, 0, ())
        bundles = cur.execute(
            "SELECT CAST(b.inputs AS VARCHAR), r.receipt FROM rms_bundles AS b "
            "JOIN rms_receipts AS r ON r.bundle_id = b.bundle_id").fetchall()
    finally:
        cur.close()
    encodings = {key.split(":", 1)[0] for key, _ in stored}
    counters: dict[str, LineCounter] = {}

    def counter_for(encoding: str) -> LineCounter | None:
        if encoding not in counters:
            try:
                counters[encoding] = LineCounter(encoding, shared=False)
            except RmsError:
                return None
        return counters[encoding]

    lines: dict[str, set[str]] = {}
    for inputs, receipt in bundles:
        try:
            body = json.loads(receipt)
            config = parse_config(body.get("config"))
            recorder = LineCounter(config.encoding, shared=False, record=True)
            # As replay packs it: an older receipt with its version's frozen format, so the
            # lines it costed (its header, metadata and date lines) are found again.
            repack(inputs, budget=body.get("budget"), config=body.get("config"),
                   receipt_version=body.get("receipt_version"), counter=recorder)
        except (RmsError, ValueError, TypeError, AttributeError, RecursionError):
            continue  # verify reports a damaged receipt or bundle
        lines.setdefault(config.encoding, set()).update(recorder.take_fresh())
    for nodes in _node_batches(con):
        for encoding in encodings:
            lines.setdefault(encoding, set()).update(
                line for c in nodes for fmt in FORMATS for line in standalone_lines(c, fmt))
    checked, wrong = 0, []
    for encoding, found in sorted(lines.items()):
        counter = counter_for(encoding)
        if counter is None:
            continue
        key = encoding_key(encoding)
        for line in found:
            digest = line_sha256(line)
            n = stored.get((key, digest))
            if n is None:
                continue
            checked += 1
            exact = counter.exact(line)
            if n != exact:
                wrong.append(WrongCost(key, digest, n, exact))
    wrong.sort(key=lambda w: (w.encoding, w.line_sha256))
    return LineCostCheck(len(stored), checked, tuple(wrong))

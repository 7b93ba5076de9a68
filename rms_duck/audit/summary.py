"""The `rms-duck audit` report: bundles, flags, exclusions, query shapes, session metrics
and verification, gathered into one value, then formatted. The views' SQL comes from the
package (duck/shipped.py), never from the database being audited; nothing is written.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import duckdb

from ..duck.cursors import audit_cursor
from ..duck.shipped import AUDIT_TABLES, with_views
from ..errors import RmsError
from .linecheck import LineCostCheck, check_line_costs
from .replay import replay
from .verify import ReceiptProblem, verify_receipts


@dataclass(frozen=True, slots=True, kw_only=True)
class Replayed:
    receipt_id: str
    identical: bool
    same_decisions: bool = False
    encoding_changed: bool = False
    differing_fields: tuple[str, ...] = ()
    changed_nodes: tuple[str, ...] = ()
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Same bytes, same decisions, same tokenizer, same receipt fields: the receipt is
        reproduced exactly."""
        return (self.identical and self.same_decisions and not self.encoding_changed
                and not self.differing_fields and self.error is None)

    @property
    def differences(self) -> list[str]:
        if self.error is not None:  # nothing was re-packed, so nothing was compared
            return [self.error]
        out = [] if self.identical else ["context bytes differ"]
        out += [] if self.same_decisions else ["decisions differ"]
        out += ["encoding changed"] if self.encoding_changed else []
        return out + ([f"receipt fields differ: {', '.join(self.differing_fields)}"]
                      if self.differing_fields else [])


@dataclass(frozen=True, slots=True, kw_only=True)
class AuditSummary:
    bundles: int
    sessions: int
    tokens_used: int
    budget: int
    chains: dict[str, int]
    flags: dict[str, int]
    exclusions: dict[str, int]
    query_shapes: list[dict[str, Any]]
    session_metrics: list[dict[str, Any]]
    problems: list[ReceiptProblem]
    replays: list[Replayed] | None = None
    line_costs: LineCostCheck | None = None

    @property
    def ok(self) -> bool:
        """Verification passed and every replay (when run) reproduced the receipt exactly."""
        return (not self.problems and all(r.ok for r in self.replays or [])
                and (self.line_costs is None or self.line_costs.ok))

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["ok"] = self.ok
        return out


def summarise(con: duckdb.DuckDBPyConnection, *, with_replay: bool = False,
              heads: dict[str, Any] | None = None,
              with_line_costs: bool = False) -> AuditSummary:
    """Collect the audit report with the shipped SQL (reads only; a read-only connection works)."""
    problems = verify_receipts(con, heads=heads)
    if any(p.problem == "STORED_OBJECT_MISSING" and p.object_name in AUDIT_TABLES
           for p in problems):
        return AuditSummary(bundles=0, sessions=0, tokens_used=0, budget=0, chains={},
                            flags={}, exclusions={}, query_shapes=[], session_metrics=[],
                            problems=problems, replays=[] if with_replay else None)
    cur = audit_cursor(con)
    try:
        bundles, sessions, used, budget = cur.execute(
            "SELECT count(*), count(DISTINCT session_id), coalesce(sum(tokens_used), 0), "
            "coalesce(sum(budget), 0) FROM rms_bundles").fetchall()[0]
        chains = _counts(cur, "SELECT chain_namespace, count(*) FROM rms_receipts "
                              "GROUP BY ALL ORDER BY 1")
        flags = _counts(cur, "SELECT flag, count(*) FROM (SELECT unnest(flags) AS flag "
                             "FROM rms_bundles) GROUP BY ALL ORDER BY 2 DESC, 1")
        exclusions = _counts(cur, with_views(
            "SELECT reason, count(*) FROM rms_receipt_decisions "
            "WHERE decision = 'excluded' GROUP BY ALL ORDER BY 2 DESC, 1",
            "rms_receipt_decisions"))
        shapes = _rows(cur, with_views(
            "SELECT * FROM rms_query_shapes ORDER BY bundles DESC, fingerprint",
            "rms_query_shapes"))
        metrics = _rows(cur, with_views(
            "SELECT * FROM rms_session_metrics ORDER BY first_at, session_id",
            "rms_receipt_decisions", "rms_session_metrics"))
        ids = [r[0] for r in cur.execute("SELECT CAST(receipt_id AS VARCHAR) FROM rms_receipts "
                                         "ORDER BY chain_namespace, seq").fetchall()]
    finally:
        cur.close()
    replays = None
    if with_replay:
        replays = []
        for rid in ids:
            try:
                result = replay(con, rid)
            except RmsError as exc:  # report it with the others instead of stopping
                replays.append(Replayed(receipt_id=rid, identical=False, error=str(exc)))
                continue
            replays.append(Replayed(receipt_id=rid, identical=result.identical,
                                    same_decisions=result.same_decisions,
                                    encoding_changed=result.encoding_changed,
                                    differing_fields=result.differing_fields,
                                    changed_nodes=result.changed_nodes))
    return AuditSummary(bundles=bundles, sessions=sessions, tokens_used=int(used),
                        budget=int(budget), chains=chains, flags=flags, exclusions=exclusions,
                        query_shapes=shapes, session_metrics=metrics, problems=problems,
                        replays=replays,
                        line_costs=check_line_costs(con) if with_line_costs else None)


def shown(value: object) -> str:
    """Text read from the audited file, safe to print on one line of a terminal report:
    control and format characters (a line break, ESC, a bidi override, ...) are written as
    escapes. Raw, a namespace, session id, flag or query text could move the cursor, erase
    the `verify FAILED` lines and print `verify OK` in their place, or start a line of its
    own."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == " " else _escape(c) for c in text)


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"


def format_summary(summary: AuditSummary, *, database: str) -> str:
    """The human-readable report printed by `rms-duck audit`. Every value read from the
    database goes through shown()."""
    s = summary
    chains = ", ".join(f"{shown(name) or '(none)'} {n}" for name, n in s.chains.items()) \
        or "none"
    lines = [
        f"database    {shown(database)}",
        (f"bundles     {s.bundles} ({s.tokens_used:,} tokens used of {s.budget:,} budgeted); "
         f"{s.sessions} session(s); receipt chains: {chains}"),
        f"flags       {_pairs(s.flags)}",
        f"exclusions  {_pairs(s.exclusions)}",
        "queries     " + ("\n            ".join(_shape(q) for q in s.query_shapes) or "none"),
        "sessions    " + ("\n            ".join(_session_table(s.session_metrics)) or "none"),
    ]
    if s.problems:
        lines.append(f"verify      FAILED: {len(s.problems)} problem(s)")
        lines += [f"  {shown(problem)}" for problem in s.problems]
    else:
        receipts = sum(s.chains.values())
        lines.append(f"verify      OK: {receipts} receipt(s) in {len(s.chains)} chain(s); "
                     "digests, links and bundle bindings all check out")
    if s.replays is not None:
        bad = [r for r in s.replays if not r.ok]
        changed = sum(1 for r in s.replays if r.changed_nodes)
        verdict = "OK" if not bad else f"FAILED ({len(bad)} differ)"
        lines.append(f"replay      {verdict}: {len(s.replays) - len(bad)} of {len(s.replays)} "
                     "receipt(s) reproduce their bytes, decisions, encoding and fields; "
                     f"{changed} with nodes changed since")
        lines += [f"  DIFFERS {shown(r.receipt_id)}: {shown('; '.join(r.differences))}"
                  for r in bad]
    if s.line_costs is not None:
        c = s.line_costs
        verdict = "OK" if c.ok else f"FAILED: {len(c.wrong)} wrong row(s)"
        lines.append(f"line costs  {verdict}: {c.checked} of {c.rows} row(s) recounted"
                     + (", all exact" if c.ok else ""))
        lines += [f"  WRONG {shown(w.encoding)} {shown(w.line_sha256)}: stores "
                  f"{shown(w.stored)}, exact {w.exact}" for w in c.wrong[:20]]
        if not c.ok:
            lines.append("  fix: DELETE FROM rms_line_costs WHERE line_sha256 IN (...) "
                         "(the table is only a cache; packs recount what is missing)")
    return "\n".join(lines)


_SESSION_COLUMNS = (
    ("session", "session_id", "{}"), ("bundles", "bundles", "{}"),
    ("STR mean", "session_str_mean", "{:.4g}"), ("STR p10", "session_str_p10", "{:.4g}"),
    ("efficiency", "budget_efficiency", "{:.3f}"), ("waste", "budget_waste", "{:.3f}"),
    ("STR trend", "str_mean_trend", "{:+.3g}"), ("waste trend", "budget_waste_trend", "{:+.3g}"),
)


def _session_table(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return []
    table = [[title for title, _, _ in _SESSION_COLUMNS]]
    for row in rows:
        table.append([("-" if row[key] is None else shown(fmt.format(row[key])))
                      for _, key, fmt in _SESSION_COLUMNS])
    widths = [max(len(r[i]) for r in table) for i in range(len(_SESSION_COLUMNS))]
    return ["  ".join(cell.ljust(w) if i == 0 else cell.rjust(w)
                      for i, (cell, w) in enumerate(zip(r, widths, strict=False))).rstrip()
            for r in table]


def _shape(q: dict[str, Any]) -> str:
    if q["fingerprint"] is None:
        # Not only Arrow: rms_store from SQL, `rms-duck pack` and pack_candidates rows too
        return f"(no ranking query: candidates passed in)  {q['bundles']} bundle(s)"
    sql = q["first_sql"] or ""
    sql = sql if len(sql) <= 60 else sql[:57] + "..."
    return f"{shown(q['fingerprint'][:12])}  {q['bundles']} bundle(s)  {shown(sql)}"


def _pairs(counts: dict[str, int]) -> str:
    return ", ".join(f"{shown(name)} {n}" for name, n in counts.items()) or "none"


def _counts(cur: duckdb.DuckDBPyConnection, sql: str) -> dict[str, int]:
    return {name: n for name, n in cur.execute(sql).fetchall()}


def _rows(cur: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    return cur.sql(sql).to_arrow_table().to_pylist()

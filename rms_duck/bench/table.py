"""Markdown tables for the speed bench: per-row ratios, bulk figures, and the targets."""

from __future__ import annotations

from typing import Any

from .workload import TEXTS

PACK_COLUMNS = ("N", "budget", "packed (tokens)", "(a) loop ms", "cold (b)/(a)",
                "warm (c)/(d)", "(e)/(b) cold", "(e)/(c) warm", "peak MiB (x Arrow)", "runs")
TARGET_COLUMNS = ("target", "measured", "met")
ISSUE_COLUMNS = ("measure (issue 10)", "measured", "target", "met", "detail")


def render_report(report) -> str:
    m = report.machine
    head = [
        (f"rms_duck speed bench: {m['cores']} cores, {m['platform']}, Python {m['python']}, "
         f"tiktoken {m['tiktoken']}, duckdb {m['duckdb']}; load average "
         f"{m['load_before']} before, {m.get('load_after')} after; "
         f"{m.get('bench_seconds', '?')} s in all."),
        f"Candidates' texts: {TEXTS[getattr(report.plan, 'text', 'notes')]} (--text).",
        "",
    ]
    clock = getattr(report.plan, "clock", "wall")
    issue = ["", ("Issue 10 targets: medians of per-repetition ratios, both sides measured "
                  f"back to back in this run ({clock} clock"
                  + ("; the GROUP BY row on the wall clock" if clock == "cpu" else "") + ")."),
             "",
             markdown(ISSUE_COLUMNS, issue_cells(report.targets))] if report.targets else []
    profile = ["", "Profile (cProfile, cumulative time):", report.profile] if report.profile else []
    if not report.rows:
        return "\n".join(head + issue[1:] + profile)
    parts = [
        *head,
        ("Packing: medians of per-repetition ratios. (a) encode_ordinary loop over the "
         "candidates' record lines; (b) cold pack; (c) warm pack; (d) one count of the output; "
         "(e) RFC-literal packer (re-render and re-count the whole context per trial)."),
        "",
        markdown(PACK_COLUMNS, [pack_cells(row) for row in report.rows]),
        "",
        ("'>' marks a lower bound: (e) was stopped at its time cap "
         f"({report.plan.e_cap:g} s; {report.plan.e_cap / 3:g} s at 10,000 candidates). "
         "Runs: repetitions of (a)-(d) / runs of (e). Peak: Python heap of one cold pack "
         "(tracemalloc), and its multiple of the candidates' Arrow size."),
        "",
        markdown(("bulk measurement", "result", "detail"), bulk_cells(report.bulk)),
        "",
        markdown(TARGET_COLUMNS, target_cells(report)),
        *issue,
    ]
    parts += profile
    return "\n".join(parts)


def markdown(columns: tuple[str, ...], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "|".join("---" for _ in columns) + "|"]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines)


def pack_cells(row: dict[str, Any]) -> list[str]:
    r = row["ratios"]
    return [
        f"{row['n']:,}", f"{row['budget']:,}", f"{row['packed']:,} ({row['tokens_used']:,})",
        f"{row['ms']['a']:.1f}", _x(r["b/a"]), _x(r["c/d"]),
        _e(r.get("e/b"), row["e_capped"]), _e(r.get("e/c"), row["e_capped"]),
        f"{row['peak_mib']:.1f} ({row['peak_x_arrow']:.1f})",
        f"{row['repeats']}" + (f"/{row['e_runs']}" if row["e_runs"] else "/0"),
    ]


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}x" if value < 10 else f"{value:.0f}x"


def _e(value: float | None, capped: bool) -> str:
    if value is None:
        return "n/a"
    return f">{_x(value)}" if capped else _x(value)


def bulk_cells(bulk: dict[str, Any]) -> list[list[str]]:
    udf, cost, pack, mem = bulk["udf"], bulk["costing"], bulk["packing"], bulk["memory"]
    small, large = min(pack["bundles"]), max(pack["bundles"])
    secs = {int(k): v for k, v in pack["seconds"].items()}
    return [
        ["token-count UDF / raw loop (throughput)", _x(udf["throughput_ratio"]),
         f"{udf['texts']:,} texts; loop {udf['loop_ms']:.0f} ms"],
        [f"bulk costing, {cost['processes']} processes / 1", _x(cost["speedup"]),
         (f"{cost['lines']:,} lines; 1 process {cost['one_process_ms']:.0f} ms; "
          f"pool start {cost['pool_start_ms']:.0f} ms (not timed)")],
        [f"bulk packing, {large:,} / {small:,} bundles (time)", f"{pack['time_ratio']:.2f}",
         (f"{pack['per_bundle']} candidates per bundle, budget {pack['budget']}; "
          f"{small:,} in {secs[small]:.1f} s, {large:,} in {secs[large]:.1f} s; "
          f"{pack['checked']} bundles recounted")],
        [f"bulk packing peak memory, {mem['bundles']:,} bundles / Arrow input",
         f"{mem['ratio']:.2f}x",
         (f"process RSS growth {mem['peak_growth_mib']:.0f} MiB (the same GROUP BY without "
          f"packing: {mem['group_by_only_mib']:.0f} MiB); packer's Python heap peak "
          f"{mem['python_peak_mib']:.0f} MiB = "
          f"{mem['python_peak_mib'] / mem['arrow_input_mib']:.2f}x; "
          f"Arrow input {mem['arrow_input_mib']:.1f} MiB ({mem['candidates']:,} candidates); "
          "fresh processes, costing worker not included")],
    ]


def target_cells(report) -> list[list[str]]:
    rows = {(row["n"], row["budget"]): row for row in report.rows}
    bulk = report.bulk
    small, large = min(bulk["packing"]["bundles"]), max(bulk["packing"]["bundles"])

    def ratio(n: int, budget: int, key: str) -> tuple[float | None, str]:
        row = rows.get((n, budget))
        if row is None or key not in row["ratios"]:
            return None, "not measured in this run"
        capped = row["e_capped"] and key.startswith("e/")
        return row["ratios"][key], ("lower bound: (e) hit its time cap" if capped else "")

    checks = [
        ("warm pack <= 2.0x (d), N=1,000, 4K", *ratio(1_000, 4_096, "c/d"), "<=", 2.0),
        ("cold pack <= 1.15x (a), N=1,000, 4K", *ratio(1_000, 4_096, "b/a"), "<=", 1.15),
        (">= 20x faster than (e), N=1,000, 4K", *ratio(1_000, 4_096, "e/b"), ">=", 20),
        (">= 100x faster than (e), N=1,000, 32K", *ratio(1_000, 32_768, "e/b"), ">=", 100),
        ("token-count UDF >= 0.95x loop throughput", bulk["udf"]["throughput_ratio"], "",
         ">=", 0.95),
        (f"bulk costing on {bulk['costing']['processes']} processes >= 1.6x one",
         bulk["costing"]["speedup"], "", ">=", 1.6),
        (f"bulk packing {large:,} vs {small:,} bundles <= 2.1x",
         bulk["packing"]["time_ratio"], "", "<=", 2.1),
        (f"peak memory, {small:,} bundles <= 2x Arrow input: process RSS",
         bulk["memory"]["ratio"], _group_by_note(bulk["memory"]), "<=", 2),
        (f"peak memory, {small:,} bundles <= 2x Arrow input: packer's Python heap",
         _heap_ratio(bulk["memory"]), "", "<=", 2),
    ]
    cells = []
    for name, value, note, op, limit in checks:
        if value is None:
            cells.append([name, "n/a", note])
            continue
        met = value <= limit if op == "<=" else value >= limit
        shown = f"{value:.2f}" + (f" ({note})" if note else "")
        cells.append([name, shown, "yes" if met else f"no (by {_by(value, limit, op)})"])
    return cells


def issue_cells(rows: list[dict[str, Any]]) -> list[list[str]]:
    return [[row["name"], f"{row['ratio']:.2f}", f"<= {row['target']:g}",
             "yes" if row["ratio"] <= row["target"] else
             f"no (by {_by(row['ratio'], row['target'], '<=')})",
             f"{row['detail']}; {row['runs']} runs"] for row in rows]


def _by(value: float, limit: float, op: str) -> str:
    """How far a miss is, as a factor of the limit."""
    return f"{value / limit:.1f}x" if op == "<=" else f"{limit / value:.1f}x"


def _group_by_note(mem: dict[str, Any]) -> str:
    return f"the GROUP BY alone: {mem['group_by_only_mib'] / mem['arrow_input_mib']:.2f}x"


def _heap_ratio(mem: dict[str, Any]) -> float | None:
    heap = mem.get("python_peak_mib")
    return None if heap is None else heap / mem["arrow_input_mib"]

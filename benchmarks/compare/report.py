"""Medians, ratios, the printed table, the JSON file and the ratio chart.

Every ratio is oriented so that > 1 means ours is better: ours/bun where higher is better
(throughput), bun/ours where lower is better (latency, CPU per job, peak RSS). With --baseline a
third server, ours at an earlier revision ("base"), gets a column and a "vs base" ratio oriented the
same way (> 1: the tree under test is better than the baseline). With --ceiling the null server
(``benchmarks.nullserver``: framing and answers only) gets a column and "vs ceiling", ours against it
oriented the same way (1: ours is as fast as framing alone with this client). A figure is only
ever computed from rounds whose workload passed verification; any failed round turns the cell
into FAILED rather than a median of the survivors.
"""
from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .rounds import CEILING_WORKLOADS, MULTI_BROKER, Plan, workloads_of

Row = dict[str, Any]
Cell = dict[str, Any]
SERVERS = ("ours", "bun", "base", "null")
# Workloads whose rate is not jobs per second.
RATE_UNITS = {"latency": "ops/s", "http_health": "req/s"}
LATENCY_KEYS = (("p50_us", "latency p50"), ("p99_us", "latency p99"), ("p999_us", "latency p999"))


@dataclass(frozen=True)
class Measure:
    """One table row: which value of which workload, and which direction is better."""

    mode: str
    label: str
    workload: str | None  # None: a per-server figure (peak RSS), not a per-workload one
    key: str
    unit: str
    higher_is_better: bool
    fmt: str


def measures(plan: Plan) -> list[Measure]:
    out: list[Measure] = []
    for mode in plan.modes:
        names = workloads_of(plan, mode)
        for name in names:
            unit = RATE_UNITS.get(name, "jobs/s")
            out.append(Measure(mode, name, name, "rate", unit, True, "{:,.0f}"))
        if "latency" in names:
            out += [Measure(mode, label, "latency", key, "us", False, "{:,.1f}")
                    for key, label in LATENCY_KEYS]
        for name in names:
            if name in MULTI_BROKER:
                out.append(Measure(mode, f"{name} kill to last ack", name, "kill_to_last_ack_s", "s", False,
                                   "{:,.2f}"))
                out.append(Measure(mode, f"{name} wake median", name, "wake_median_ms", "ms", False, "{:,.2f}"))
                continue
            per = "requests" if RATE_UNITS.get(name) == "req/s" else "jobs"
            out.append(Measure(mode, f"cpu {name}", name, "cpu_s_per_1k", f"cpu s/1k {per}", False, "{:.4f}"))
        out.append(Measure(mode, "peak RSS", None, "peak_rss_mib", "MiB", False, "{:,.1f}"))
    return out


def _workload_row(record: Row, name: str) -> Row | None:
    return next((r for r in record.get("workloads", []) if r.get("workload") == name), None)


def _value(record: Row, m: Measure) -> tuple[bool, float | None]:
    """(passed, value) of one measure in one server run."""
    if m.workload is None:
        rows = record.get("workloads", [])
        passed = bool(rows) and all(r.get("verified") for r in rows) and record.get("peak_rss_kib")
        return bool(passed), record["peak_rss_kib"] / 1024 if passed else None
    row = _workload_row(record, m.workload)
    if row is None or not row.get("verified"):
        return False, None
    return True, row.get(m.key)


def cell(runs: Iterable[Row], m: Measure, server: str) -> Cell:
    records = [r for r in runs if r["mode"] == m.mode and r["server"] == server]
    if not records or (server == "null" and m.workload is not None and m.workload not in CEILING_WORKLOADS):
        return {"status": "not run"}
    available = [r for r in records if r["available"]]
    if not available:
        return {"status": "not available", "reason": records[0].get("reason", "")}
    values: list[float] = []
    failed = 0
    for record in available:
        passed, value = _value(record, m)
        if not passed:
            failed += 1
        elif value is not None:
            values.append(float(value))
    missing = len(records) - len(available)
    if failed or not values:
        return {"status": "failed", "verified": False, "failed_rounds": failed, "rounds": len(available),
                "unavailable_rounds": missing}
    return {"status": "ok", "verified": True, "median": statistics.median(values), "values": values,
            "rounds": len(available), "unavailable_rounds": missing}


def ratio(ours: Cell, bun: Cell, higher_is_better: bool) -> float | None:
    if ours["status"] != "ok" or bun["status"] != "ok" or ours["median"] <= 0 or bun["median"] <= 0:
        return None
    return ours["median"] / bun["median"] if higher_is_better else bun["median"] / ours["median"]


def summarise(runs: Sequence[Row], plan: Plan) -> list[Row]:
    rows: list[Row] = []
    for m in measures(plan):
        cells = {s: cell(runs, m, s) for s in SERVERS}
        row = {
            "mode": m.mode, "measure": m.label, "workload": m.workload, "metric": m.key, "unit": m.unit,
            "better": "higher" if m.higher_is_better else "lower",
            "ratio_is": "ours/bun" if m.higher_is_better else "bun/ours",
            "ours": cells["ours"], "bun": cells["bun"],
            "ratio": ratio(cells["ours"], cells["bun"], m.higher_is_better),
            "fmt": m.fmt,
        }
        if "base" in plan.servers:
            row["base"] = cells["base"]
            row["vs_base"] = ratio(cells["ours"], cells["base"], m.higher_is_better)
        if "null" in plan.servers:
            row["null"] = cells["null"]
            row["vs_ceiling"] = ratio(cells["ours"], cells["null"], m.higher_is_better)
        rows.append(row)
    return rows


def worst(summary: Sequence[Row], count: int = 3) -> list[Row]:
    rated = sorted((r for r in summary if r["ratio"] is not None), key=lambda r: r["ratio"])
    return [{"mode": r["mode"], "measure": r["measure"], "ratio": round(r["ratio"], 3)}
            for r in rated[:count]]


# -- text -----------------------------------------------------------------------------------------


def _cell_text(c: Cell, fmt: str) -> str:
    status = c["status"]
    if status == "not run":
        return "-"
    if status == "not available":
        return "n/a"
    if status == "failed":
        return f"FAILED {c['failed_rounds']}/{c['rounds']}"
    text = fmt.format(c["median"])
    values = c["values"]
    if len(values) > 1 and c["median"]:
        # Half the spread between the best and the worst round, as a share of the median.
        spread = (max(values) - min(values)) / 2 / c["median"] * 100
        text += f" ±{spread:.0f}%"
    if c["unavailable_rounds"]:
        text += f" [{c['rounds']}/{c['rounds'] + c['unavailable_rounds']}]"
    return text


def _align(rows: list[Sequence[str]], right: set[int]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]

    def line(cells: Sequence[str]) -> str:
        pairs = enumerate(zip(cells, widths, strict=True))
        padded = (c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in pairs)
        return "  ".join(padded).rstrip()

    return [line(r) for r in rows]


def _measured(r: Row) -> bool:
    return any(r[s]["status"] in ("ok", "failed") for s in SERVERS if s in r)


def _ratio_text(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def format_table(summary: Sequence[Row]) -> str:
    with_base = any("base" in r for r in summary)
    with_null = any("null" in r for r in summary)
    head = ["mode", "measure", "unit", "better", "ours (median)", "bun (median)", "ratio", "ratio is"]
    if with_base:
        head += ["base (median)", "vs base"]
    if with_null:
        head += ["ceiling (median)", "vs ceiling"]
    extra = (["-", "-"] if with_base else []) + (["-", "-"] if with_null else [])
    body: list[Sequence[str]] = [head, tuple("-" * len(h) for h in head)]
    empty_modes: set[str] = set()
    for r in summary:
        if not any(_measured(x) for x in summary if x["mode"] == r["mode"]):
            # Nothing ran in this mode: one line says so instead of a screen of n/a.
            if r["mode"] not in empty_modes:
                empty_modes.add(r["mode"])
                line = [r["mode"], "all measures", "", "", _cell_text(r["ours"], ""),
                        _cell_text(r["bun"], ""), "-", ""]
                body.append(line + extra)
            continue
        line = [r["mode"], r["measure"], r["unit"], r["better"], _cell_text(r["ours"], r["fmt"]),
                _cell_text(r["bun"], r["fmt"]), _ratio_text(r["ratio"]), r["ratio_is"]]
        if with_base:
            line += [_cell_text(r["base"], r["fmt"]), _ratio_text(r["vs_base"])]
        if with_null:
            line += [_cell_text(r["null"], r["fmt"]), _ratio_text(r["vs_ceiling"])]
        body.append(line)
    return "\n".join(_align(body, {4, 5, 6, 8, 9, 10, 11}))


def _unavailable_notes(runs: Sequence[Row]) -> list[str]:
    rounds: dict[str, list[int]] = {}
    reasons: dict[str, str] = {}
    for run in runs:
        if not run["available"]:
            key = f"{run['server']} {run['mode']}"
            rounds.setdefault(key, []).append(run["round"])
            reasons.setdefault(key, run.get("reason", ""))
    return [f"n/a: {key} not available in round(s) {', '.join(map(str, rounds[key]))}: {reasons[key]}"
            for key in rounds]


def source_changes(runs: Sequence[Row]) -> list[str]:
    """Distinct source fingerprints of our server across the runs, in order of first use."""
    return list(dict.fromkeys(r["source"] for r in runs if r.get("source")))


def format_footer(summary: Sequence[Row], plan: Plan, runs: Sequence[Row]) -> str:
    lines = [
        "ratio > 1 means ours is better on every row: ours/bun for throughput (higher is better),",
        "bun/ours for latency, server CPU per 1k jobs and peak RSS (lower is better).",
        f"medians over {plan.rounds} round(s); ±x% is half the spread between the best and worst round;",
        "cpu = server utime+stime during the measured phase;",
        "FAILED k/n = verification failed in k of n rounds (no figure is shown for it).",
        "[k/n] = the server started in only k of n rounds; the median is over those k.",
        *_unavailable_notes(runs),
    ]
    if any("null" in r for r in summary):
        lines.append("ceiling = benchmarks.nullserver (frames and answers, memory mode, TCP workloads only);"
                     " vs ceiling 1 = ours as fast as framing alone with this client.")
    baselines = list(dict.fromkeys(r["baseline"] for r in runs if r.get("baseline")))
    if baselines:
        lines.append(f"base = ours at {', '.join(baselines)}; vs base > 1 means the tree under test is better.")
    sources = source_changes(runs)
    if len(sources) > 1:
        lines.append(f"WARNING: our server's source changed during the run ({' -> '.join(sources)}); "
                     "rounds measured different code.")
    bad = worst(summary)
    if bad:
        listed = ", ".join(f"{w['mode']} {w['measure']} {w['ratio']:.2f}" for w in bad)
        lines.append(f"worst ratios: {listed}")
    return "\n".join(lines)


# -- files ----------------------------------------------------------------------------------------


def write_json(doc: dict[str, Any], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    return path


def _log_ratio_axis(ax: Any, values: Sequence[float]) -> None:
    # A log axis makes 0.5 and 2 equally far from parity; plain tick labels (not 2x10^0) read better.
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    low, high = min(0.5, min(values) / 1.3), max(2.0, max(values) * 1.3)
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    ticks = [t for t in (0.1, 0.25, 0.5, 1, 2, 4, 8, 16, 32) if low <= t <= high]
    ax.xaxis.set_major_locator(FixedLocator(ticks))
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.xaxis.set_minor_locator(NullLocator())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.axvline(1.0, color="black", linewidth=0.8)


def write_chart(summary: Sequence[Row], path: Path, title: str) -> str:
    """Bar chart of the ratios; returns a one-line note of what happened."""
    rated = [r for r in summary if r["ratio"] is not None]
    if not rated:
        return "chart skipped: no ratios (only one server ran or every cell failed)"
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "chart skipped: matplotlib is not installed (pip install -e '.[bench]')"
    labels = [f"{r['mode']} · {r['measure']}" for r in rated]
    values = [r["ratio"] for r in rated]
    fig, ax = plt.subplots(figsize=(9, 0.3 * len(rated) + 1.6))
    colors = ["#2e7d32" if v >= 1 else "#c62828" for v in values]
    # Bars grow from parity (1.0) so a loss points left and a win points right.
    ax.barh(range(len(rated)), [v - 1.0 for v in values], left=1.0, color=colors)
    ax.set_yticks(range(len(rated)), labels, fontsize=8)
    ax.invert_yaxis()
    _log_ratio_axis(ax, values)
    for i, v in enumerate(values):
        ax.annotate(f"{v:.2f}", (v, i), xytext=(3 if v >= 1 else -3, 0), textcoords="offset points",
                    va="center", ha="left" if v >= 1 else "right", fontsize=7)
    ax.set_xlabel("ratio, > 1 = ours better (ours/bun for throughput, bun/ours for latency, CPU, RSS)")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return f"chart: {path}"

"""Command line of the side-by-side benchmark.

    python -m benchmarks.compare [--quick] [--only ours|bun] [--baseline REV] [--ceiling]
        [--modes memory,sqlite,postgres] [--workloads push pushb100 ...] [--rounds N] [--jobs N] [--json]
        [--out FILE]

The report (header and table) goes to stdout, progress to stderr; with --json stdout carries the
JSON document instead and the header moves to stderr. Exit status: 0 when every measured workload
passed verification, 1 when one failed, 2 when the run could not start.
"""
from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from pathlib import Path
from typing import Any

from benchmarks.http_load import HTTP_WORKLOADS
from benchmarks.workloads import CLIENTS, WORKLOADS

from .baseline import ensure_baseline
from .install import BunInstall, InstallError, ensure_bun
from .machine import facts, header
from .postgres import Databases
from .report import format_footer, format_table, source_changes, summarise, worst, write_chart, write_json
from .rounds import MULTI_BROKER, Plan, run_plan
from .servers import DEFAULT_MODES, MODES, REPO_ROOT, Launcher, NullLauncher, OursLauncher

RESULTS = REPO_ROOT / "benchmarks" / "results"
# The TCP workloads of benchmarks.load, then the HTTP ones of benchmarks.http_load.
ALL_WORKLOADS = [*WORKLOADS, *HTTP_WORKLOADS, *MULTI_BROKER]
DEFAULTS = {"rounds": 3, "jobs": 50_000, "warmup": 2_000, "timeout": 600.0}
# Small enough to finish in seconds, large enough that every workload still runs its real path.
QUICK = {"rounds": 1, "jobs": 2_000, "warmup": 200, "timeout": 120.0}


def _csv(choices: Sequence[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        items = [item for item in text.replace(" ", ",").split(",") if item]
        bad = [item for item in items if item not in choices]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(choices)} (got {text!r})")
        return items

    return parse


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help=f"a run of seconds: {QUICK['jobs']} jobs, {QUICK['rounds']} round, short warm-up")
    p.add_argument("--only", choices=("ours", "bun"), help="run one server only (no ratios)")
    p.add_argument("--ceiling", action="store_true",
                   help="also run benchmarks.nullserver (frames and answers only) as a ceiling column, memory "
                        "mode, TCP workloads")
    p.add_argument("--baseline", metavar="REV",
                   help="also run ours at git revision REV (built under benchmarks/.cache/baseline) in the "
                        "same rounds, as a third server \"base\" with a before/after ratio")
    p.add_argument("--modes", type=_csv(MODES), default=list(DEFAULT_MODES),
                   help="memory,sqlite,postgres (default: memory,sqlite)")
    p.add_argument("--postgres-url", metavar="URL",
                   help="the PostgreSQL of --modes postgres (default: a server started for the run)")
    p.add_argument("--workloads", type=_csv(ALL_WORKLOADS), nargs="+", default=None, metavar="W",
                   help=f"workloads, in order (default: all of {','.join(ALL_WORKLOADS)})")
    p.add_argument("--rounds", type=int,
                   help=f"A/B rounds (default {DEFAULTS['rounds']}, quick {QUICK['rounds']})")
    p.add_argument("--jobs", type=int,
                   help=f"jobs per workload (default {DEFAULTS['jobs']}, quick {QUICK['jobs']})")
    p.add_argument("--warmup", type=int,
                   help=f"jobs per warm-up workload (default {DEFAULTS['warmup']}; 0: none)")
    p.add_argument("--timeout", type=float, help="seconds allowed per workload")
    p.add_argument("--client", choices=CLIENTS, default="c",
                   help="the client of pushb100, pushb1000, pullb_ackb and worker: the C generator of "
                        "benchmarks.tcpload (default), or the Python one of benchmarks.workloads")
    p.add_argument("--json", action="store_true", help="print JSON on stdout instead of the table")
    p.add_argument("--out", type=Path, help="JSON file (default benchmarks/results/compare-<timestamp>.json)")
    p.add_argument("--no-chart", action="store_true", help="do not write the PNG chart of the ratios")
    args = p.parse_args(argv)
    for name in ("rounds", "jobs"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name} must be at least 1")
    return args


def make_plan(args: argparse.Namespace) -> Plan:
    base = QUICK if args.quick else DEFAULTS
    workloads = [w for group in args.workloads for w in group] if args.workloads else ALL_WORKLOADS

    def pick(name: str) -> Any:
        value = getattr(args, name)
        return base[name] if value is None else value

    servers: tuple[str, ...] = (args.only,) if args.only else ("ours", "bun")
    if args.baseline:
        servers += ("base",)
    if args.ceiling:
        servers += ("null",)
    return Plan(
        servers=servers,
        modes=tuple(dict.fromkeys(args.modes)),
        workloads=tuple(dict.fromkeys(workloads)),
        rounds=pick("rounds"), jobs=pick("jobs"), warmup=pick("warmup"), timeout=pick("timeout"),
        client=args.client,
    )


def plan_text(plan: Plan) -> str:
    order = " / ".join(plan.servers) + (", order swapped each round" if len(plan.servers) > 1 else "")
    return (f"{plan.rounds} round(s) of {order}; modes {', '.join(plan.modes)}; "
            f"{plan.jobs:,} jobs per workload, warm-up {plan.warmup:,}; "
            f"workloads {', '.join(plan.workloads)}; {plan.client} client for the TCP rows that have one")


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _run(coro: Coroutine[Any, Any, Any]) -> Any:
    # The same event loop as benchmarks.load's command line, so figures from both agree.
    try:
        import uvloop
    except ImportError:
        return asyncio.run(coro)
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(coro)


def _launchers(plan: Plan, baseline: str | None) -> tuple[dict[str, Launcher], BunInstall | None]:
    launchers: dict[str, Launcher] = {"ours": OursLauncher()}
    bun = None
    if "bun" in plan.servers:
        bun = ensure_bun()
        launchers["bun"] = bun.launcher()
    if baseline:
        launchers["base"] = ensure_baseline(baseline)
    if "null" in plan.servers:
        launchers["null"] = NullLauncher()
    return launchers, bun


def _any_failed(runs: Sequence[dict[str, Any]]) -> bool:
    return any(not row.get("verified") for run in runs for row in run.get("workloads", []))


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    plan = make_plan(args)
    try:
        launchers, bun = _launchers(plan, args.baseline)
    except InstallError as exc:
        _log(f"cannot start the comparison: {exc}")
        return 2
    info = facts(bun)
    head = header(info, plan_text(plan))
    print(head, file=sys.stderr if args.json else sys.stdout, flush=True)

    started = time.time()
    with contextlib.ExitStack() as stack:
        databases = stack.enter_context(Databases(args.postgres_url)) if "postgres" in plan.modes else None
        if databases is not None:
            _log(databases.note)
        runs = _run(run_plan(plan, launchers, _log, databases))
    summary = summarise(runs, plan)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(started))
    out = args.out or RESULTS / f"compare-{stamp}.json"
    doc = {
        "command": " ".join(["python -m benchmarks.compare", *(argv if argv is not None else sys.argv[1:])]),
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(started)),
        "seconds": round(time.time() - started, 1),
        # Other work on the machine shows here; a high figure at either end explains wide spreads.
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
        "machine": info, "plan": plan.__dict__, "ours_sources": source_changes(runs),
        "summary": summary, "worst": worst(summary), "runs": runs,
    }
    write_json(doc, out)
    title = f"bunqueue: ours vs Bun, {info['cpu_model']}, nproc {info['nproc']}"
    chart = out.with_suffix(".png")
    chart_note = "chart skipped: --no-chart" if args.no_chart else write_chart(summary, chart, title)
    if args.json:
        print(json.dumps(doc, indent=2, default=str))
    else:
        print(f"\n{format_table(summary)}\n\n{format_footer(summary, plan, runs)}")
    _log(f"json: {out}\n{chart_note}")
    return 1 if _any_failed(runs) else 0

"""Load generator for any server that speaks the bunqueue TCP protocol: the command line over
:mod:`benchmarks.workloads`.

    python -m benchmarks.load --host 127.0.0.1 --port 6789 [--token T]
        [--workloads push pushb100 ...] [--jobs N] [--client c|python] [--json]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import platform
import sys
from collections.abc import Sequence
from typing import Any

from benchmarks.workloads import (
    CLIENTS,
    DEFAULT_DATA_BYTES,
    DEFAULT_JOBS,
    WORKLOADS,
    WorkloadError,
    run_workload,
    server_info,
)
from bunqueue.client import BunqueueError

# -- command line ---------------------------------------------------------------------------------


def _format_rate(row: dict[str, Any]) -> str:
    return f"{row['rate']:,.0f}" if "rate" in row else "-"


def _status(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"ERROR: {row['error']}"
    return "ok" if row["verified"] else "FAILED: " + "; ".join(row["problems"])


def _progress_line(row: dict[str, Any]) -> str:
    if "error" in row:
        return f"{row['workload']:<11} {_status(row)}"
    line = (
        f"{row['workload']:<11} {row['jobs']:>8} jobs  {row['seconds']:>7.2f} s  "
        f"{_format_rate(row):>10} {row['unit']}  client cpu {row['client_cpu']:.2f}"
    )
    if "p50_us" in row:
        line += f"  p50/p99/p999 {row['p50_us']}/{row['p99_us']}/{row['p999_us']} us"
    return f"{line}  {_status(row)}"


def format_table(rows: list[dict[str, Any]]) -> str:
    headers = ("workload", "jobs", "seconds", "rate", "unit", "client cpu", "p50 us", "p99 us", "p999 us", "check")
    body = []
    for row in rows:
        if "error" in row:
            body.append((row["workload"], "-", "-", "-", "-", "-", "-", "-", "-", _status(row)))
            continue
        body.append(
            (
                row["workload"],
                str(row["jobs"]),
                f"{row['seconds']:.2f}",
                _format_rate(row),
                row["unit"],
                f"{row['client_cpu']:.2f}",
                str(row.get("p50_us", "-")),
                str(row.get("p99_us", "-")),
                str(row.get("p999_us", "-")),
                _status(row),
            )
        )
    widths = [max(len(h), *(len(r[i]) for r in body)) for i, h in enumerate(headers)]
    right = {1, 2, 3, 5, 6, 7, 8}

    def fmt(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths)))

    lines = [fmt(headers), fmt(["-" * w for w in widths])]
    lines.extend(fmt(r) for r in body)
    return "\n".join(line.rstrip() for line in lines)


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.load", description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=6789)
    parser.add_argument("--token", default=None, help="auth token, sent as Auth on every connection")
    parser.add_argument("--workloads", nargs="+", choices=list(WORKLOADS), default=list(WORKLOADS), metavar="W",
                        help=f"workloads to run, in order (default: all of {', '.join(WORKLOADS)})")
    parser.add_argument("--jobs", type=int, default=DEFAULT_JOBS, help="jobs per workload (default: %(default)s)")
    parser.add_argument("--connections", type=int, default=None,
                        help="connections per workload (default: each workload's own)")
    parser.add_argument("--data-bytes", type=int, default=DEFAULT_DATA_BYTES,
                        help="size of the string in each job's data (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds allowed per workload")
    parser.add_argument("--client", choices=CLIENTS, default="c",
                        help="the client of pushb100, pushb1000, pullb_ackb and worker: the C generator of "
                             "benchmarks.tcpload (default), or the Python one")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    parser.add_argument("--no-uvloop", action="store_true", help="use the default asyncio event loop")
    return parser.parse_args(argv)


async def _main(args: argparse.Namespace, loop_name: str) -> int:
    addr = (args.host, args.port)
    try:
        server = await server_info(addr, args.token)
    except (OSError, BunqueueError) as exc:
        print(f"cannot use {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    print(f"# {server.get('server')} {server.get('version')} at {args.host}:{args.port}, "
          f"{args.jobs} jobs per workload, {loop_name}", file=sys.stderr)

    rows: list[dict[str, Any]] = []
    live = sys.stderr.isatty()
    for name in args.workloads:
        if live:
            print(f"{name:<11} running ...", end="\r", file=sys.stderr, flush=True)
        try:
            row = await run_workload(
                name, addr, args.jobs, token=args.token, timeout=args.timeout,
                connections=args.connections, data_bytes=args.data_bytes, client=args.client,
            )
        except (WorkloadError, BunqueueError, OSError) as exc:  # TimeoutError is an OSError
            row = {"workload": name, "error": str(exc) or type(exc).__name__}
        rows.append(row)
        print(_progress_line(row) + ("\x1b[K" if live else ""), file=sys.stderr, flush=True)

    if args.json:
        report = {
            "target": f"{args.host}:{args.port}",
            "server": server,
            "jobs": args.jobs,
            "client": {"python": platform.python_version(), "loop": loop_name, "generator": args.client},
            "results": rows,
        }
        print(json.dumps(report, indent=2))
    else:
        print(format_table(rows))
    return 0 if all(r.get("verified") for r in rows) else 1


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse_args(argv)
    loop_factory = None
    loop_name = "asyncio"
    if not args.no_uvloop:
        try:
            import uvloop
        except ImportError:
            pass
        else:
            loop_factory, loop_name = uvloop.new_event_loop, f"uvloop {uvloop.__version__}"
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(_main(args, loop_name))


if __name__ == "__main__":
    sys.exit(main())

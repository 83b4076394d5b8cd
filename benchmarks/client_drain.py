"""How fast this package's asyncio Worker drains no-op jobs from this broker, beside the TypeScript
client's Worker draining the Bun original, in alternating rounds on fresh servers (memory mode).

    python -m benchmarks.client_drain [--rounds 3] [--jobs 20000] [--concurrency 50] [--batch-size 50]

Each side pushes the jobs with add_bulk / addBulk in chunks of 1000, then times a Worker from its start
until its last `completed` event. The TS side is ts_worker_drain.ts; Bun and the TS client are the ones the
compatibility tests install under tests/compat/js (tests/compat/clients.py), installed on first use.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time
import uuid

from benchmarks.compare.install import BunInstall
from benchmarks.compare.servers import HOST, OursLauncher, started
from benchmarks.ts_worker_drain import drain as ts_drain
from bunqueue.asyncio import Job, Queue, Worker
from tests.compat import clients

CHUNK = 1000


def compat_install() -> BunInstall:
    """Bun and the TS client from the compatibility tests' pinned npm install."""
    bun = clients.ensure_js()
    modules = clients.JS_DIR / "node_modules"
    version = json.loads((modules / "bunqueue" / "package.json").read_text())["version"]
    return BunInstall(bun, modules / "bunqueue" / "dist" / "cli" / "index.js", clients.BUN_VERSION, version)


async def python_drain(port: int, jobs: int, concurrency: int, batch_size: int) -> dict[str, float]:
    """Push ``jobs`` no-op jobs, then time an asyncio Worker until every one has completed."""
    name = f"drain-{uuid.uuid4().hex[:8]}"
    async with Queue(name, host=HOST, port=port) as queue:
        for start in range(0, jobs, CHUNK):
            await queue.add_bulk([{"name": "noop", "data": {"i": i}} for i in range(start, min(jobs, start + CHUNK))])
        assert await queue.count() == jobs
        finished = asyncio.Event()
        completed = 0

        def on_completed(job: Job, result: object) -> None:
            nonlocal completed
            completed += 1
            if completed == jobs:
                finished.set()

        async def noop(job: Job) -> None:
            return None

        started_at = time.perf_counter()
        worker = Worker(name, noop, host=HOST, port=port, concurrency=concurrency, batch_size=batch_size)
        worker.on("completed", on_completed)
        await finished.wait()
        seconds = time.perf_counter() - started_at
        await worker.close()
        counts = await queue.get_job_counts()
        if counts["completed"] != jobs:
            raise RuntimeError(f"drain incomplete: {counts}")
    return {"jobs": jobs, "seconds": seconds, "rate": jobs / seconds}


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.client_drain", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="A/B rounds (default 3)")
    p.add_argument("--jobs", type=int, default=20_000, help="jobs drained per round (default 20000)")
    p.add_argument("--concurrency", type=int, default=50, help="Worker concurrency, both sides (default 50)")
    p.add_argument("--batch-size", type=int, default=50, help="the Python Worker's PULLB size (default 50)")
    p.add_argument("--warmup", type=int, default=2_000, help="jobs of the warm-up drain (0: none)")
    p.add_argument("--only", choices=("python", "ts"), help="measure one side only")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per TS drain")
    p.add_argument("--json", action="store_true", help="print the rates as JSON")
    return p.parse_args()


def one_round(side: str, args: argparse.Namespace, install: BunInstall | None) -> dict[str, float]:
    if side == "python":
        with started(OursLauncher(), "memory") as server:
            if args.warmup:
                asyncio.run(python_drain(server.port, args.warmup, args.concurrency, args.batch_size))
            return asyncio.run(python_drain(server.port, args.jobs, args.concurrency, args.batch_size))
    assert install is not None
    with started(install.launcher(), "memory") as server:
        if args.warmup:
            ts_drain(install, server.port, args.warmup, args.concurrency, args.timeout)
        return ts_drain(install, server.port, args.jobs, args.concurrency, args.timeout)


def main() -> int:
    args = parse_args()
    sides = [args.only] if args.only else ["python", "ts"]
    install = compat_install() if "ts" in sides else None
    rates: dict[str, list[float]] = {side: [] for side in sides}
    for round_index in range(args.rounds):
        order = sides if round_index % 2 == 0 else sides[::-1]
        for side in order:
            row = one_round(side, args, install)
            rates[side].append(row["rate"])
            print(f"round {round_index + 1} {side:>6}: {row['rate']:>9,.0f} jobs/s ({row['seconds']:.3f} s)",
                  file=sys.stderr, flush=True)
    medians = {side: statistics.median(values) for side, values in rates.items()}
    if args.json:
        print(json.dumps({"jobs": args.jobs, "concurrency": args.concurrency, "rates": rates, "median": medians}))
        return 0
    print(f"Worker drain, {args.jobs} no-op jobs, concurrency {args.concurrency}")
    labels = {"python": "asyncio Worker -> this broker", "ts": "TS Worker -> Bun original"}
    for side in sides:
        listed = ", ".join(f"{r:,.0f}" for r in rates[side])
        print(f"  {labels[side]}: median {medians[side]:>9,.0f} jobs/s   rounds: {listed}")
    if len(sides) == 2:
        print(f"  python / ts: {medians['python'] / medians['ts']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What webhooks cost the push path, and whether every delivery arrives while the receiver answers.

    python -m benchmarks.webhooks [--jobs 20000] [--hooks 5] [--rounds 3]

Each round starts a fresh memory-mode server twice, alternating: once without webhooks, once with
``--hooks`` webhooks subscribed to every event, all pointing at an HTTP receiver on loopback (a process
of its own, answering 200 at once). After a warm-up of ``WARMUP_JOBS`` (with webhooks: until their
deliveries arrived), the PUSHB 100 phase (4 connections, 4 batches in flight each) is timed; then the
script waits until the receiver has counted one delivery per pushed job per webhook and reads
ListWebhooks for successes, failures and drops. The outbox bound (WEBHOOK_QUEUE_SIZE) is set to the job
count (warm-up included) so a whole run fits: what is measured is the cost of queueing and sending, not of dropping.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time
import urllib.request
from typing import Any

from benchmarks.workloads import _connect_many, _measure, _push_batches, job_data
from bunqueue._testbase.server import ServerProcess, free_port
from bunqueue.client import connect

EVENTS = ["job.pushed", "job.started", "job.completed", "job.failed", "job.progress"]
QUEUE = "webhook-bench"
WARMUP_QUEUE = "webhook-warmup"
WARMUP_JOBS = 500


def serve_receiver(port: int) -> None:
    """The receiver process: counts POSTs per path; GET /count answers the total as JSON."""
    from aiohttp import web

    counts = {"total": 0}

    async def hook(request: web.Request) -> web.Response:
        await request.read()
        counts["total"] += 1
        return web.Response(text="ok")

    async def count(request: web.Request) -> web.Response:
        return web.json_response(counts)

    app = web.Application()
    app.router.add_post("/{path}", hook)
    app.router.add_get("/count", count)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def received(port: int) -> int:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/count", timeout=5) as resp:
        return int(json.load(resp)["total"])


async def wait_for(port: int, count: int, timeout_s: float) -> int:
    """Wait until the receiver has counted ``count`` deliveries (or the time is up); its count."""
    deadline = time.perf_counter() + timeout_s
    got = received(port)
    while got < count and time.perf_counter() < deadline:
        await asyncio.sleep(0.1)
        got = received(port)
    return got


async def one_run(jobs: int, hooks: int, receiver_port: int) -> dict[str, Any]:
    env = {
        "RATE_LIMIT_MAX_REQUESTS": "0",
        "WEBHOOK_ALLOW_PRIVATE": "true",
        "WEBHOOK_QUEUE_SIZE": str(jobs + WARMUP_JOBS),
        "LOG_LEVEL": "error",
    }
    proc = ServerProcess(env=env).start()
    try:
        admin = await connect(*proc.addr)
        for i in range(hooks):
            reply = await admin.request({"cmd": "AddWebhook", "url": f"http://127.0.0.1:{receiver_port}/h{i}",
                                         "events": EVENTS})
            assert reply["ok"], reply
        conns = await _connect_many(proc.addr, 4, None)
        # A warm-up on another queue, the same with and without webhooks; with them, the timed phase starts
        # once the warm-up's deliveries arrived (the delivery side is up, as in a broker that runs).
        before_warmup = received(receiver_port)
        await _push_batches(conns, WARMUP_QUEUE, WARMUP_JOBS, 100, 4, job_data(64))
        await wait_for(receiver_port, before_warmup + WARMUP_JOBS * hooks, 60)
        start_count = received(receiver_port)
        with _measure() as timer:
            ids = await _push_batches(conns, QUEUE, jobs, 100, 4, job_data(64))
        assert len(ids) == jobs
        expected = jobs * hooks
        started = time.perf_counter()
        got = await wait_for(receiver_port, start_count + expected, 300) - start_count
        drained = time.perf_counter() - started
        listing = (await admin.request({"cmd": "ListWebhooks"}))["data"]["webhooks"]
        for conn in conns:
            await conn.close()
        await admin.close()
    finally:
        proc.stop()
    return {
        "hooks": hooks,
        "rate": jobs / timer.seconds,
        "expected": expected,
        "delivered": got,
        "success": sum(h["successCount"] for h in listing) - WARMUP_JOBS * hooks,
        "failure": sum(h["failureCount"] for h in listing),
        "dropped": sum(h.get("dropped", 0) for h in listing),
        "drain_s": drained,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--hooks", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--serve-receiver", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_receiver:
        serve_receiver(args.serve_receiver)
        return 0
    port = free_port()
    receiver = subprocess.Popen([sys.executable, "-m", "benchmarks.webhooks", "--serve-receiver", str(port)])
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                received(port)
                break
            except OSError:
                assert time.monotonic() < deadline, "the receiver did not start"
                time.sleep(0.1)
        runs: dict[int, list[dict[str, Any]]] = {0: [], args.hooks: []}
        for _ in range(args.rounds):
            for hooks in (0, args.hooks):
                row = asyncio.run(one_run(args.jobs, hooks, port))
                runs[hooks].append(row)
                print(
                    f"hooks={hooks} PUSHB 100: {row['rate']:,.0f} jobs/s; deliveries {row['delivered']:,}"
                    f"/{row['expected']:,} (success {row['success']:,}, failure {row['failure']}, dropped "
                    f"{row['dropped']}) in {row['drain_s']:.1f} s after the pushes",
                    flush=True,
                )
        base = statistics.median(r["rate"] for r in runs[0])
        hooked = statistics.median(r["rate"] for r in runs[args.hooks])
        lost = sum(r["expected"] - r["delivered"] for r in runs[args.hooks])
        print(f"median PUSHB 100: {base:,.0f} jobs/s without webhooks, {hooked:,.0f} with {args.hooks} "
              f"({hooked / base:.2f}x); deliveries lost: {lost}")
        return 0 if lost == 0 else 1
    finally:
        receiver.terminate()
        receiver.wait()


if __name__ == "__main__":
    sys.exit(main())

"""Several brokers on one PostgreSQL, one of them killed part way: the issue's multi-broker run.

``run_brokers`` takes brokers that are already running in one namespace (any server that speaks the
protocol: ours or the Bun original in PostgreSQL mode) and a way to kill the first one. It preloads ``n``
jobs with PUSHB 100 spread over every broker, then drains them with PULL(owner, lockTtl) + ACK workers
spread evenly over the brokers. When 40% of the jobs are acknowledged the first broker is killed, and its
workers die with it, as when a machine is lost: the jobs they held come back to work only when their
leases lapse. The others keep working until every job is acknowledged or the deadline passes.

It reports the drain's jobs/s and the time from the kill to the last acknowledgement, which bounds how long
the jobs the killed broker had leased took to come back to work (the bar: lockTtl + 3 s), and checks: every
job completed, none acknowledged twice, none lost. ``wake_*_ms`` is a second measure: a
push on one broker waking a long-poll PULL waiting on another, from the push's reply to the pull's.
"""
from __future__ import annotations

import asyncio
import contextlib
import inspect
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from bunqueue.client import Connection, connect, prepare

Addr = tuple[str, int]
Reply = dict[str, Any]

PUSH_BATCH = 100
WORKERS_PER_BROKER = 16
KILL_AT = 0.4
WAKE_SAMPLES = 20
# A long-poll that no push woke in this time counts as a miss (the server's poll answered it, or nothing).
WAKE_WAIT_MS = 2000


class Tally:
    """What the workers saw: acks by job id, when the kill came and the last ack."""

    def __init__(self) -> None:
        self.acked: dict[str, int] = {}
        self.killed_at: float | None = None
        self.last_ack = 0.0

    def ack(self, job_id: str) -> None:
        self.acked[job_id] = self.acked.get(job_id, 0) + 1
        self.last_ack = time.monotonic()


async def _push(conns: list[Connection], queue: str, n: int) -> list[str]:
    ids: list[str] = []
    batches = [min(PUSH_BATCH, n - at) for at in range(0, n, PUSH_BATCH)]

    async def pusher(conn: Connection, mine: list[int]) -> None:
        for size in mine:
            reply = await conn.request({"cmd": "PUSHB", "queue": queue, "jobs": [{"data": {"b": 1}}] * size})
            if not reply.get("ok"):
                raise RuntimeError(f"PUSHB refused: {reply}")
            ids.extend(reply["ids"])

    await asyncio.gather(*(pusher(conn, batches[i::len(conns)]) for i, conn in enumerate(conns)))
    return ids


async def _worker(conn: Connection, queue: str, lock_ttl: int, tally: Tally, n: int, doomed: bool,
                  stop: asyncio.Event) -> None:
    pull = prepare({"cmd": "PULL", "queue": queue, "owner": "bench", "lockTtl": lock_ttl, "timeout": 500})
    try:
        while not stop.is_set():
            reply = await conn.request(pull)
            job = reply.get("job")
            if job is None:
                continue
            answer = await conn.request({"cmd": "ACK", "id": job["id"], "token": reply["token"]})
            if answer.get("ok"):
                tally.ack(job["id"])
            if len(tally.acked) >= n:
                stop.set()
    except (ConnectionError, OSError):
        # The killed broker's workers die with it, leaving what they held leased.
        if not doomed:
            raise


async def run_brokers(
    addrs: list[Addr], kill_first: Callable[[], Awaitable[None] | None], n: int = 20_000, lock_ttl: int = 5_000,
    deadline_s: float = 300.0, queue: str | None = None, progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    queue = queue or f"brokers-{uuid.uuid4().hex[:8]}"
    conns = [await connect(*addr) for addr in addrs for _ in range(2)]
    problems: list[str] = []
    try:
        wake = await _wake_latency(conns[0], conns[2], f"{queue}-wake")
        pushed = await _push(conns, queue, n)
        tally = Tally()
        stop = asyncio.Event()
        workers = [await connect(*addr) for addr in addrs for _ in range(WORKERS_PER_BROKER)]
        doomed = workers[:WORKERS_PER_BROKER]
        started = time.monotonic()
        tasks = [
            asyncio.create_task(_worker(conn, queue, lock_ttl, tally, n, conn in doomed, stop)) for conn in workers
        ]
        while len(tally.acked) < KILL_AT * n and not stop.is_set():
            await asyncio.sleep(0.005)
        tally.killed_at = time.monotonic()
        # A caller that must kill at a chosen moment (while the broker holds leases) returns an awaitable.
        if inspect.isawaitable(killing := kill_first()):
            await killing
        if progress is not None:
            progress(f"killed the first broker at {len(tally.acked):,} of {n:,} jobs acknowledged")
        # An ack the killed broker committed but never answered leaves the tally one short for good: the
        # run also ends when a surviving broker counts nothing left to work.
        tasks.append(asyncio.create_task(_watch(conns[2], queue, tally, n, stop, progress)))
        try:
            await asyncio.wait_for(stop.wait(), deadline_s)
        except TimeoutError:
            problems.append(f"{n - len(tally.acked)} jobs not acknowledged {deadline_s:.0f} s after the start")
        stop.set()
        outcomes = await asyncio.gather(*tasks, return_exceptions=True)
        errors = [o for o in outcomes if isinstance(o, BaseException)]
        if errors:
            problems.append(f"{len(errors)} surviving workers failed: {errors[0]!r}")
        elapsed = tally.last_ack - started
        for conn in workers[WORKERS_PER_BROKER:]:
            await conn.close()
        problems += await _check(conns[2], queue, pushed, tally, n)
    finally:
        for conn in conns[2:]:
            await conn.close()
    return {
        "workload": "brokers3", "brokers": len(addrs), "jobs": n, "lock_ttl_ms": lock_ttl,
        "rate": n / elapsed if elapsed > 0 else 0.0, "unit": "jobs/s", "seconds": round(elapsed, 3),
        "kill_to_last_ack_s": round(tally.last_ack - (tally.killed_at or tally.last_ack), 3),
        **wake, "verified": not problems, "problems": problems,
    }


async def _watch(conn: Connection, queue: str, tally: Tally, n: int, stop: asyncio.Event,
                 progress: Callable[[str], None] | None) -> None:
    while not stop.is_set():
        await asyncio.sleep(0.25)
        counts = (await conn.request({"cmd": "GetJobCounts", "queue": queue})).get("counts") or {}
        if not any(counts.get(state) for state in ("waiting", "prioritized", "delayed", "active")):
            stop.set()
        elif progress is not None:
            progress(f"{len(tally.acked):,} of {n:,} jobs acknowledged")


async def _check(conn: Connection, queue: str, pushed: list[str], tally: Tally, n: int) -> list[str]:
    problems = []
    if len(set(pushed)) != n:
        problems.append(f"{len(set(pushed))} distinct ids for {n} pushed jobs")
    if twice := [job for job, count in tally.acked.items() if count > 1]:
        problems.append(f"{len(twice)} jobs acknowledged more than once")
    missing = [job for job in pushed if job not in tally.acked]
    # An ack the killed broker committed but never answered: the job is completed all the same.
    lost = []
    for job in missing:
        state = (await conn.request({"cmd": "GetState", "id": job})).get("state")
        if state != "completed":
            lost.append((job, state))
    if lost:
        problems.append(f"{len(lost)} jobs never completed, e.g. {lost[:3]}")
    return problems


async def _wake_latency(pusher: Connection, waiter: Connection, queue: str) -> dict[str, Any]:
    """Median and worst time from a push's reply on one broker to a long-poll's reply on another."""
    samples: list[float] = []
    for _ in range(WAKE_SAMPLES):
        pending = asyncio.ensure_future(waiter.request({"cmd": "PULL", "queue": queue, "timeout": WAKE_WAIT_MS}))
        await asyncio.sleep(0.02)
        await pusher.request({"cmd": "PUSH", "queue": queue, "data": 1})
        pushed = time.perf_counter()
        reply = await pending
        if reply.get("job") is not None:
            samples.append((time.perf_counter() - pushed) * 1000)
    misses = WAKE_SAMPLES - len(samples)
    if not samples:
        return {"wake_median_ms": None, "wake_max_ms": None, "wake_misses": misses}
    return {"wake_median_ms": round(statistics.median(samples), 3), "wake_max_ms": round(max(samples), 3),
            "wake_misses": misses}


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.brokers [--server ours|bun] [--jobs N] [--postgres-url URL]``: one run, as JSON."""
    import argparse
    import json

    from benchmarks.compare.install import ensure_bun
    from benchmarks.compare.postgres import Databases
    from benchmarks.compare.servers import OursLauncher, started

    parser = argparse.ArgumentParser(prog="python -m benchmarks.brokers", description=main.__doc__)
    parser.add_argument("--server", choices=("ours", "bun"), default="ours")
    parser.add_argument("--jobs", type=int, default=20_000)
    parser.add_argument("--brokers", type=int, default=3)
    parser.add_argument("--lock-ttl", type=int, default=5_000)
    parser.add_argument("--postgres-url")
    args = parser.parse_args(argv)
    launcher = OursLauncher() if args.server == "ours" else ensure_bun().launcher()

    async def run(databases: Databases) -> dict[str, Any]:
        async with databases.fresh() as url:
            with contextlib.ExitStack() as stack:
                servers = [stack.enter_context(started(launcher, "postgres", postgres_url=url))
                           for _ in range(args.brokers)]
                return await run_brokers(
                    [s.addr for s in servers], servers[0].proc.kill, args.jobs, args.lock_ttl,
                    progress=lambda line: print(line, file=sys.stderr, flush=True),
                )

    with Databases(args.postgres_url) as databases:
        result = asyncio.run(run(databases))
    print(json.dumps(result, indent=2))
    return 0 if result["verified"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

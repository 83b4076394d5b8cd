"""A PostgreSQL namespace with many queued jobs: how long a broker takes to start on it and to serve it.

    python -m benchmarks.postgres_start [--jobs 1000000] [--postgres-url URL]

Fills a fresh database with ``--jobs`` queued jobs (PUSHB 1000 over four connections, through a first
broker), stops that broker, then starts a second one on the same namespace and reports: the time from its
start to its listening port, to its first pulled job and to its first GetJobCounts, and what that count
says. A broker reads no job at start (PostgreSQL holds them), so none of these grows with the queue.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from typing import Any

from benchmarks.compare.postgres import Databases
from benchmarks.compare.servers import OursLauncher, started
from bunqueue.client import connect

BATCH = 1000
CONNECTIONS = 4


async def fill(addr: tuple[str, int], jobs: int, progress: Any) -> float:
    conns = [await connect(*addr) for _ in range(CONNECTIONS)]
    batches = [min(BATCH, jobs - at) for at in range(0, jobs, BATCH)]
    done = 0
    began = time.perf_counter()

    async def pusher(conn: Any, mine: list[int]) -> None:
        nonlocal done
        for size in mine:
            reply = await conn.request({"cmd": "PUSHB", "queue": "million", "jobs": [{"data": {"n": 1}}] * size})
            if not reply.get("ok"):
                raise RuntimeError(f"PUSHB refused: {reply}")
            done += size
            if done % 100_000 < size:
                progress(f"{done:,} of {jobs:,} jobs queued")

    await asyncio.gather(*(pusher(conn, batches[i::CONNECTIONS]) for i, conn in enumerate(conns)))
    for conn in conns:
        await conn.close()
    return time.perf_counter() - began


async def first_answers(addr: tuple[str, int], began: float) -> dict[str, Any]:
    conn = await connect(*addr)
    try:
        pulled = await conn.request({"cmd": "PULL", "queue": "million", "owner": "w", "lockTtl": 60_000})
        first_pull = time.perf_counter() - began
        counts = (await conn.request({"cmd": "GetJobCounts", "queue": "million"}))["counts"]
        first_counts = time.perf_counter() - began
    finally:
        await conn.close()
    return {"first_pull_s": round(first_pull, 3), "first_counts_s": round(first_counts, 3),
            "pulled": pulled.get("job") is not None, "counts": counts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.postgres_start", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000)
    parser.add_argument("--postgres-url")
    args = parser.parse_args(argv)

    def progress(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    async def run(databases: Databases) -> dict[str, Any]:
        async with databases.fresh() as url:
            with started(OursLauncher(), "postgres", postgres_url=url) as first:
                fill_s = await fill(first.addr, args.jobs, progress)
            progress("restarting the broker on the filled namespace")
            began = time.perf_counter()
            with started(OursLauncher(), "postgres", timeout=120, postgres_url=url) as second:
                listening = time.perf_counter() - began
                answers = await first_answers(second.addr, began)
        return {"jobs": args.jobs, "fill_s": round(fill_s, 1), "fill_rate": round(args.jobs / fill_s),
                "listening_s": round(listening, 3), **answers}

    with Databases(args.postgres_url) as databases:
        result = asyncio.run(run(databases))
    print(json.dumps(result, indent=2))
    return 0 if result["pulled"] and result["counts"].get("waiting", 0) == args.jobs - 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())

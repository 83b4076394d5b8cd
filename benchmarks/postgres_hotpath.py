"""Time the PostgreSQL hot path: PUSHB of 100 jobs, and a 50-way claim/ack drain, on a throwaway PostgreSQL.

    python -m benchmarks.postgres_hotpath [--jobs 20000] [--pushers 1,8] [--workers 50] [--url URL]

Without ``--url`` it starts the test suite's PostgreSQL (``bunqueue._testbase.postgres``: durability off,
as in the tests) on ``--port``. The figures go through the hot path's components directly (the command
layer does not reach them yet): building each job (``JobFactory.build``, as a PUSHB does), the collectors,
the statements and the decoding of claimed rows, with a broker session and a listening connection open.
"""
from __future__ import annotations

import argparse
import asyncio
import time
import uuid

import asyncpg

from bunqueue._core.jobfactory import JobFactory
from bunqueue._testbase.postgres import PostgresServer
from bunqueue.config import Settings
from bunqueue.storage.postgres.hotpath import HotPath
from bunqueue.storage.postgres.migrations import migrate
from bunqueue.storage.postgres.pool import PostgresConfig, connect

BATCH = 100
LOCK_TTL_MS = 30_000


async def pushb(hot: HotPath, jobs: int, pushers: int, queue: str) -> float:
    """PUSHB of BATCH jobs from ``pushers`` concurrent callers until ``jobs`` are in; jobs/s."""
    factory = JobFactory()
    per_pusher = jobs // pushers // BATCH

    async def pusher() -> None:
        for _ in range(per_pusher):
            now = time.time() * 1000
            batch = [factory.build({"name": "j", "data": {"i": i, "p": "x" * 32}}, queue, now, True)
                     for i in range(BATCH)]
            ids = await hot.push_many(batch)
            assert len(ids) == BATCH

    started = time.perf_counter()
    await asyncio.gather(*(pusher() for _ in range(pushers)))
    return per_pusher * pushers * BATCH / (time.perf_counter() - started)


async def drain(hot: HotPath, workers: int, queue: str) -> tuple[int, float]:
    """``workers`` concurrent pull-one/ack-one loops until the queue is empty; (jobs, jobs/s)."""
    done = 0

    async def worker(n: int) -> None:
        nonlocal done
        while True:
            (jobs, tokens) = await hot.claim(queue, 1, f"w{n}", LOCK_TTL_MS)
            if not jobs:
                return
            await hot.ack(jobs[0].id, tokens[0], None, True)
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(worker(n) for n in range(workers)))
    return done, done / (time.perf_counter() - started)


async def run(url: str, jobs: int, pushers: list[int], workers: int, pool_size: int) -> None:
    config = PostgresConfig.from_settings(Settings(
        postgres_url=url, broker_id="bench", postgres_namespace=f"bench-{uuid.uuid4().hex[:8]}",
        postgres_pool_size=pool_size,
    ))
    conn = await connect(config)
    try:
        await migrate(conn)
    finally:
        await conn.close()
    hot = await HotPath.open(config)
    try:
        for count in pushers:
            rate = await pushb(hot, jobs, count, f"push{count}")
            print(f"PUSHB {BATCH}, {count} concurrent pusher(s): {rate:,.0f} jobs/s")
        await pushb(hot, jobs, 8, "drain")
        drained, rate = await drain(hot, workers, "drain")
        print(f"{workers}-way claim/ack drain of {drained:,} jobs: {rate:,.0f} jobs/s")
    finally:
        await hot.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=20_000, help="jobs per PUSHB run and in the drain")
    parser.add_argument("--pushers", default="1,8", help="comma-separated counts of concurrent PUSHB callers")
    parser.add_argument("--workers", type=int, default=50, help="concurrent claim/ack loops in the drain")
    parser.add_argument("--pool-size", type=int, default=8, help="PostgreSQL connections of the broker")
    parser.add_argument("--url", help="an existing PostgreSQL database (else one is started)")
    parser.add_argument("--port", type=int, default=None, help="port of the PostgreSQL started (default: free)")
    args = parser.parse_args()
    pushers = [int(n) for n in args.pushers.split(",")]
    if args.url:
        asyncio.run(run(args.url, args.jobs, pushers, args.workers, args.pool_size))
        return
    server = PostgresServer(args.port).start()
    try:
        asyncio.run(create_database(server.url(), "bench"))
        asyncio.run(run(server.url("bench"), args.jobs, pushers, args.workers, args.pool_size))
    finally:
        server.stop()


async def create_database(admin_url: str, name: str) -> None:
    conn = await asyncpg.connect(admin_url)
    try:
        await conn.execute(f'CREATE DATABASE "{name}"')
    finally:
        await conn.close()


if __name__ == "__main__":
    main()

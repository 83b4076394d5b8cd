"""Time a SQLite server's start-up recovery: fill a fresh data file, stop, and time the restart.

    python -m benchmarks.recovery --jobs 1000000

Prints the fill rate, the graceful-stop time, the time until the restarted server listens, and the
server's own "recovered ..." log line.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import tempfile
import time
from pathlib import Path

from bunqueue._testbase.server import ServerProcess
from bunqueue.client import connect

BATCH = 1000


async def fill(addr: tuple[str, int], jobs: int) -> None:
    conn = await connect(*addr)
    batch = [{"name": "j", "data": {"i": i, "p": "x" * 32}} for i in range(BATCH)]
    pending = []
    for k in range(jobs // BATCH):
        pending.append(conn.request_nowait({"cmd": "PUSHB", "queue": f"q{k % 4}", "jobs": batch}))
        if len(pending) >= 8:
            for reply in await asyncio.gather(*pending):
                assert reply["ok"], reply
            pending = []
    for reply in await asyncio.gather(*pending):
        assert reply["ok"], reply
    await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs to recover (a multiple of 1000)")
    args = parser.parse_args()
    data = Path(tempfile.mkdtemp(prefix="bunqueue-recovery-")) / "q.db"
    env = {"BUNQUEUE_DATA_PATH": str(data), "RATE_LIMIT_MAX_REQUESTS": "0"}
    proc = ServerProcess(env=env).start()
    started = time.perf_counter()
    asyncio.run(fill(proc.addr, args.jobs))
    filled = time.perf_counter() - started
    print(f"filled {args.jobs:,} jobs in {filled:.1f} s ({args.jobs / filled:,.0f} jobs/s)")
    started = time.perf_counter()
    proc.stop(timeout=300)
    print(f"graceful stop: {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    proc = ServerProcess(env=env).start(timeout=600)
    print(f"restart until listening: {time.perf_counter() - started:.1f} s")
    proc.stop(timeout=300)
    log = proc.stderr()
    for line in re.findall(r"recovered .*", log):
        print(line)
    print(f"data file: {os.path.getsize(data) / 1e6:,.0f} MB")


if __name__ == "__main__":
    main()

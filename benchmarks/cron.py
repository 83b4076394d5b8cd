"""Cron costs: server CPU with many idle crons, and how late crons due in the same second fire.

    python -m benchmarks.cron --idle 10000 --seconds 30 --due 1000

Idle: registers ``--idle`` crons whose next runs are hours away, lets the server settle, then reads the
server's CPU ticks (utime + stime in /proc/PID/stat) over ``--seconds`` seconds.

Lateness: registers ``--due`` crons on a schedule that fires them all at one whole second a few seconds
ahead, then reads the jobs they pushed; a job's ``createdAt`` is the moment its cron fired, so lateness is
``createdAt`` minus the scheduled second, by the server's own clock. Prints p50, p99 and the maximum.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import time
from datetime import UTC, datetime
from pathlib import Path

from bunqueue._testbase.server import ServerProcess
from bunqueue.client import Connection, connect

WINDOW = 200
LEAD_S = 4


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 of the whole line; the split above starts at field 3.
    return int(fields[11]) + int(fields[12])


async def register(conn: Connection, crons: list[dict[str, object]]) -> None:
    for start in range(0, len(crons), WINDOW):
        replies = await asyncio.gather(*(conn.request({"cmd": "Cron", **cron}) for cron in crons[start:start + WINDOW]))
        for reply in replies:
            assert reply["ok"], reply


async def idle(addr: tuple[str, int], pid: int, count: int, seconds: float) -> None:
    conn = await connect(*addr)
    await register(conn, [
        {"name": f"idle-{i}", "queue": f"idle-{i % 16}", "data": {"i": i}, "repeatEvery": 3_600_000 + i * 1000}
        for i in range(count)
    ])
    await conn.close()
    await asyncio.sleep(2)
    hz = os.sysconf("SC_CLK_TCK")
    before = cpu_ticks(pid)
    started = time.monotonic()
    await asyncio.sleep(seconds)
    used = (cpu_ticks(pid) - before) / hz
    elapsed = time.monotonic() - started
    share = 100 * used / elapsed
    print(f"idle: {count:,} crons, server CPU {used:.2f} s over {elapsed:.1f} s = {share:.3f} % of a core")


async def lateness(addr: tuple[str, int], count: int) -> None:
    conn = await connect(*addr)
    target = datetime.fromtimestamp(int(time.time()) + LEAD_S + max(1, count // 2000), UTC)
    expression = f"{target.second} {target.minute} {target.hour} * * *"
    await register(conn, [
        {"name": f"due-{i}", "queue": "due", "data": {"i": i}, "schedule": expression} for i in range(count)
    ])
    scheduled = target.timestamp() * 1000
    if time.time() * 1000 > scheduled:
        raise SystemExit("registering took longer than the lead time; use fewer crons")
    deadline = time.monotonic() + LEAD_S + 30
    while True:
        reply = await conn.request({"cmd": "GetJobCounts", "queue": "due"})
        if reply["counts"]["waiting"] >= count or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.1)
    jobs = (await conn.request({"cmd": "GetJobs", "queue": "due", "limit": count}))["jobs"]
    await conn.close()
    late = sorted(job["createdAt"] - scheduled for job in jobs)
    if len(late) < count:
        raise SystemExit(f"only {len(late)} of {count} crons fired")
    p99 = late[min(len(late) - 1, int(len(late) * 0.99))]
    print(
        f"lateness: {count:,} crons due at one second: p50 {statistics.median(late):.0f} ms,"
        f" p99 {p99:.0f} ms, max {late[-1]:.0f} ms, min {late[0]:.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--idle", type=int, default=10_000, help="idle crons for the CPU reading (0: skip)")
    parser.add_argument("--seconds", type=float, default=30.0, help="how long to read the idle CPU")
    parser.add_argument("--due", type=int, default=1000, help="crons due in the same second (0: skip)")
    args = parser.parse_args()
    if args.idle:
        proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "0"}).start()
        try:
            assert proc.proc is not None
            asyncio.run(idle(proc.addr, proc.proc.pid, args.idle, args.seconds))
        finally:
            proc.stop()
    if args.due:
        proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "0"}).start()
        try:
            asyncio.run(lateness(proc.addr, args.due))
        finally:
            proc.stop()


if __name__ == "__main__":
    main()

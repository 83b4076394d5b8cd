"""Server memory per queued job: a fresh server of each kind takes N small jobs and keeps them queued.

    python -m benchmarks.queued_memory [--jobs 1000000] [--baseline REV] [--modes memory,sqlite] [--no-bun]

Each server starts fresh (the compare harness's launchers), gets ``--jobs`` jobs of the shape
``{"name": "job", "data": {"i": n}}`` in PUSHB frames of 1,000 (one in flight), and stays idle while its
resident memory settles. Reported per server: RSS when idle, peak RSS (``VmHWM``) and RSS with every job
queued, and (queued - idle) / N as bytes per job. ``--baseline REV`` adds our server at that revision.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from bunqueue._testbase.frames import RawClient

from .compare.baseline import ensure_baseline
from .compare.install import ensure_bun
from .compare.servers import Launcher, OursLauncher, started

BATCH = 1000


def _status(pid: int, key: str) -> float:
    """A ``/proc/<pid>/status`` memory line, in MiB."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no {key} for {pid}")


def _settled_rss(pid: int, seconds: float = 2.0) -> float:
    time.sleep(seconds)
    return _status(pid, "VmRSS")


def _push(client: RawClient, jobs: int, progress: bool) -> None:
    pushed = 0
    while pushed < jobs:
        n = min(BATCH, jobs - pushed)
        batch = [{"name": "job", "data": {"i": pushed + k}} for k in range(n)]
        reply = client.call({"cmd": "PUSHB", "queue": "resident", "jobs": batch})
        if not reply.get("ok"):
            raise RuntimeError(f"PUSHB refused: {reply}")
        pushed += n
        if progress and pushed % 100_000 == 0:
            print(f"  {pushed:,} jobs queued", file=sys.stderr, flush=True)


def _count(client: RawClient) -> int:
    reply = client.call({"cmd": "Count", "queue": "resident"})
    return int(reply.get("count", -1))


def measure(launcher: Launcher, mode: str, jobs: int, progress: bool) -> dict[str, Any]:
    with started(launcher, mode) as server:
        client = RawClient(server.addr, timeout=120.0)
        try:
            client.call({"cmd": "Ping"})
            idle = _settled_rss(server.pid)
            _push(client, jobs, progress)
            queued = _settled_rss(server.pid)
            counted = _count(client)
        finally:
            client.close()
        peak = _status(server.pid, "VmHWM")
    return {
        "server": launcher.name, "mode": mode, "jobs": jobs, "counted": counted,
        "idle_mib": round(idle, 1), "queued_mib": round(queued, 1), "peak_mib": round(peak, 1),
        "bytes_per_job": round((queued - idle) * 1024 * 1024 / jobs),
    }


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=1_000_000)
    p.add_argument("--baseline", metavar="REV", help="also run our server at this git revision")
    p.add_argument("--modes", default="memory", help="memory,sqlite (default: memory)")
    p.add_argument("--no-bun", action="store_true", help="leave the Bun original out")
    p.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = p.parse_args(argv)

    launchers: list[Launcher] = [OursLauncher()]
    if args.baseline:
        launchers.append(ensure_baseline(args.baseline))
    if not args.no_bun:
        launchers.append(ensure_bun().launcher())
    rows = []
    for mode in args.modes.split(","):
        for launcher in launchers:
            print(f"{launcher.name} ({mode}): pushing {args.jobs:,} jobs", file=sys.stderr, flush=True)
            rows.append(measure(launcher, mode, args.jobs, progress=not args.json))
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'server':<8} {'mode':<7} {'jobs':>10} {'counted':>10} {'idle MiB':>9} {'queued MiB':>11} "
          f"{'peak MiB':>9} {'bytes/job':>10}")
    for r in rows:
        print(f"{r['server']:<8} {r['mode']:<7} {r['jobs']:>10,} {r['counted']:>10,} {r['idle_mib']:>9} "
              f"{r['queued_mib']:>11} {r['peak_mib']:>9} {r['bytes_per_job']:>10,}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

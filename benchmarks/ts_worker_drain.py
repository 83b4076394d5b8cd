"""How fast the TypeScript client's Worker (npm bunqueue, under Bun, over TCP) drains no-op jobs, against
this broker and against the Bun original, in alternating rounds on fresh servers.

    python -m benchmarks.ts_worker_drain [--rounds 3] [--jobs 20000] [--concurrency 50] [--only ours|bun]

Each round starts each server fresh (memory mode), runs a short warm-up drain, pushes the jobs with
addBulk, then times a Worker from its start until its last `completed` event (ts_worker_drain.ts).
Bun and bunqueue come pinned from npm into benchmarks/.cache/bun (see compare/install.py).
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

from benchmarks.compare.install import BunInstall, ensure_bun
from benchmarks.compare.servers import Launcher, OursLauncher, started

DRAIN_SCRIPT = Path(__file__).resolve().parent / "ts_worker_drain.ts"


def drain(install: BunInstall, port: int, jobs: int, concurrency: int, timeout: float) -> dict[str, float]:
    """One push-then-drain run of the TS script against the broker on `port`."""
    client = install.cli.parents[1] / "client" / "index.js"
    cmd = [str(install.bun), str(DRAIN_SCRIPT), str(client), str(port), str(jobs), str(concurrency)]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"drain failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return json.loads(result.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks.ts_worker_drain", description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3, help="A/B rounds (default 3)")
    p.add_argument("--jobs", type=int, default=20_000, help="jobs drained per round (default 20000)")
    p.add_argument("--concurrency", type=int, default=50, help="Worker concurrency (default 50)")
    p.add_argument("--warmup", type=int, default=2_000, help="jobs of the warm-up drain (0: none)")
    p.add_argument("--only", choices=("ours", "bun"), help="measure one server only")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds allowed per drain")
    p.add_argument("--json", action="store_true", help="print the rates as JSON")
    return p.parse_args()


def main() -> int:
    args = parse_args()
    install = ensure_bun()
    launchers: dict[str, Launcher] = {"ours": OursLauncher(), "bun": install.launcher()}
    names = [args.only] if args.only else ["ours", "bun"]
    rates: dict[str, list[float]] = {name: [] for name in names}
    for round_index in range(args.rounds):
        # Swap the order each round so neither server always runs on a machine the other just warmed.
        order = names if round_index % 2 == 0 else names[::-1]
        for name in order:
            with started(launchers[name], "memory") as server:
                if args.warmup:
                    drain(install, server.port, args.warmup, args.concurrency, args.timeout)
                row = drain(install, server.port, args.jobs, args.concurrency, args.timeout)
            rates[name].append(row["rate"])
            print(f"round {round_index + 1} {name:>4}: {row['rate']:>9,.0f} jobs/s "
                  f"({row['seconds']:.3f} s)", file=sys.stderr, flush=True)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    if args.json:
        print(json.dumps({"jobs": args.jobs, "concurrency": args.concurrency, "rates": rates,
                          "median": medians}))
        return 0
    print(f"TS Worker drain, {args.jobs} no-op jobs, concurrency {args.concurrency}, "
          f"bun {install.bun_version}, bunqueue {install.bunqueue_version} client")
    for name in names:
        listed = ", ".join(f"{r:,.0f}" for r in rates[name])
        print(f"  {name:>4}: median {medians[name]:>9,.0f} jobs/s   rounds: {listed}")
    if len(names) == 2:
        print(f"  ours / bun: {medians['ours'] / medians['bun']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())

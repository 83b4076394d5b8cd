"""What the monitoring counters cost the job path, in process.

    python -m benchmarks.counting [--jobs 30000] [--runs 9]

Pushes ``--jobs`` jobs in batches of 100, pulls them 100 at a time and ACKs each, on a fresh broker per
run, alternating runs with the counters as they are and with their per-job calls (``on_pulled``,
``on_completed``) replaced by no-ops; prints the median CPU time per job of each.
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from bunqueue.broker.facade import Broker
from bunqueue.monitoring.counters import Counters

BATCH = 100


def one_run(jobs: int) -> float:
    broker = Broker()
    batch = [{"name": "j", "data": 1}] * BATCH
    started = time.process_time()
    for _ in range(jobs // BATCH):
        broker.push_many("q", batch)
    q = broker.queue("q")
    while True:
        out, _ = broker.pull(q, BATCH, None, None, 30_000.0, True)
        if not out:
            break
        for job in out:
            broker.ack(job, None, False, False)
    return (time.process_time() - started) / jobs * 1e9


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--jobs", type=int, default=30_000)
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args(argv)
    real: dict[str, Callable[..., Any]] = {"on_pulled": Counters.on_pulled, "on_completed": Counters.on_completed}
    with_counters: list[float] = []
    without: list[float] = []
    for _ in range(args.runs):
        with_counters.append(one_run(args.jobs))
        for name in real:
            setattr(Counters, name, lambda *a: None)
        try:
            without.append(one_run(args.jobs))
        finally:
            for name, fn in real.items():
                setattr(Counters, name, fn)
    a, b = statistics.median(with_counters), statistics.median(without)
    print(f"push + pull + ACK: {a:,.0f} ns/job with the counters, {b:,.0f} ns/job without their per-job calls "
          f"({a - b:+,.0f} ns/job)")


if __name__ == "__main__":
    main()

"""Soak: a fresh SQLite server under a steady load for a long time; every job once, memory flat.

    nice python -m benchmarks.soak --minutes 60 --rate 5000 --workers 20

A producer PUSHBs batches of 100 jobs paced to ``--rate`` (ordinary pushes, answered before their commit,
as most producers run; ``--durable`` waits for the commit), each job with ``removeOnComplete`` as a
production queue at this rate would set, so completed jobs leave memory and the file and the memory figures
measure leaks rather than retention. ``--workers`` connections each run a worker: PULLB of up to 10 jobs under
a 30 s lease, long-polling 1 s when the queue is empty, and one ACKB (with the lease tokens) per batch sent
together with the next PULLB. Every ``--sample-seconds`` a progress line gives the push and completion
rates, the backlog (waiting/active, from the server), the server's RSS and CPU and the data file's size.

After the load the workers drain what is left, then the table (``--json``: one JSON object) and the checks;
the exit status is 1 if any fails:

- every job pushed was acknowledged exactly once (a tally indexed by the job's sequence number), no ACK was
  refused and the server holds no waiting, active, delayed or failed job after the drain;
- the completion rate over the load reached 95% of ``--rate``;
- memory flat: the least-squares slope of RSS over the second half of the load, times the second half's
  length, is within 5% of the half-time RSS (at least 2 MB, below which allocator noise dominates). A leak
  of one small object per job (50 bytes or more) at 5,000 jobs/s grows RSS by 450 MB in half an hour, so
  the bound cannot hide one, while the first half is left for the heaps and SQLite's page cache to settle.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from benchmarks.soakload import LoadShape, SoakError, Tally, produce, work
from bunqueue._testbase.server import ServerProcess
from bunqueue.client import Connection, connect

PENDING_STATES = ("waiting", "prioritized", "delayed", "active", "failed", "waiting-children", "paused")
# The share of the target rate the completions must reach over the load.
RATE_FLOOR = 0.95
# Memory flat: projected growth over the second half within this share of the half-time RSS, or the floor.
FLAT_SHARE = 0.05
FLAT_FLOOR_MB = 2.0
# Time given to the workers after the load to complete what is still queued, beyond the backlog's own time.
DRAIN_GRACE_SECONDS = 60.0


@dataclass(frozen=True)
class SoakConfig:
    minutes: float
    rate: float
    workers: int
    push_batch: int = 100
    pull_count: int = 10
    data_bytes: int = 64
    durable: bool = False
    sample_seconds: float = 10.0


@dataclass
class Sample:
    seconds: float
    pushed: int
    completed: int
    push_rate: float
    completion_rate: float
    waiting: int
    active: int
    rss_mb: float
    server_cpu: float
    client_cpu: float
    file_mb: float


class Sampler:
    """Reads the tally, the server's counts and its /proc figures; one sample per call."""

    def __init__(self, server: ServerProcess, control: Connection, queue: str, data_path: Path, tally: Tally):
        self.server, self.control, self.queue, self.data_path, self.tally = server, control, queue, data_path, tally
        self.samples: list[Sample] = []
        self.started = time.monotonic()
        self._last = (self.started, 0, 0, server.cpu_seconds(), time.process_time())

    def file_mb(self) -> float:
        """The data file and its WAL."""
        return self.data_path.stat().st_size / 1e6 + self.wal_mb()

    def wal_mb(self) -> float:
        wal = Path(f"{self.data_path}-wal")
        return wal.stat().st_size / 1e6 if wal.exists() else 0.0

    async def take(self) -> Sample:
        counts = (await self.control.request({"cmd": "GetJobCounts", "queue": self.queue}))["counts"]
        now, cpu, own = time.monotonic(), self.server.cpu_seconds(), time.process_time()
        then, pushed, completed, then_cpu, then_own = self._last
        span = max(now - then, 1e-9)
        tally = self.tally
        sample = Sample(
            seconds=round(now - self.started, 1),
            pushed=tally.pushed,
            completed=tally.completed,
            push_rate=round((tally.pushed - pushed) / span, 1),
            completion_rate=round((tally.completed - completed) / span, 1),
            waiting=counts["waiting"],
            active=counts["active"],
            rss_mb=round(self.server.rss_mb(), 1),
            server_cpu=round((cpu - then_cpu) / span, 2),
            client_cpu=round((own - then_own) / span, 2),
            file_mb=round(self.file_mb(), 2),
        )
        self._last = (now, tally.pushed, tally.completed, cpu, own)
        self.samples.append(sample)
        return sample

    async def every(self, seconds: float, progress: Callable[[str], None]) -> None:
        while True:
            await asyncio.sleep(seconds - (time.monotonic() - self.started) % seconds)
            progress(progress_line(await self.take()))


def progress_line(s: Sample) -> str:
    return (
        f"{s.seconds:7.0f} s  pushed {s.pushed:>11,}  completed {s.completed:>11,}  "
        f"{s.push_rate:>7,.0f} / {s.completion_rate:>7,.0f} jobs/s  waiting {s.waiting:>6,} active {s.active:>4,}  "
        f"RSS {s.rss_mb:6.1f} MB  CPU {s.server_cpu:4.0%} (client {s.client_cpu:4.0%})  file {s.file_mb:7.2f} MB"
    )


def least_squares_slope(points: list[tuple[float, float]]) -> float:
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    spread = sum((x - mean_x) ** 2 for x, _ in points)
    return sum((x - mean_x) * (y - mean_y) for x, y in points) / spread if spread else 0.0


def memory_figures(samples: list[Sample], load_seconds: float) -> dict[str, Any]:
    """RSS at start, half-time, max and end, and the slope and flatness over the second half of the load."""
    half = load_seconds / 2
    second_half = [(s.seconds, s.rss_mb) for s in samples if half - 0.5 <= s.seconds <= load_seconds + 0.5]
    half_rss = min(samples, key=lambda s: abs(s.seconds - half)).rss_mb
    slope = least_squares_slope(second_half) if len(second_half) >= 3 else None
    bound = max(FLAT_SHARE * half_rss, FLAT_FLOOR_MB)
    return {
        "rss_start_mb": samples[0].rss_mb,
        "rss_half_mb": half_rss,
        "rss_max_mb": max(s.rss_mb for s in samples),
        "rss_end_mb": samples[-1].rss_mb,
        "rss_second_half_samples": len(second_half),
        "rss_slope_mb_per_10min": None if slope is None else round(slope * 600, 3),
        "rss_projected_growth_mb": None if slope is None else round(slope * half, 2),
        "rss_growth_bound_mb": round(bound, 2),
        # Fewer than three samples in the second half cannot show a trend: the check fails rather than passes.
        "memory_flat": slope is not None and slope * half <= bound,
    }


async def _drain(tally: Tally, deadline: float) -> None:
    while tally.completed < tally.pushed and time.monotonic() < deadline:
        await asyncio.sleep(0.1)


async def soak(
    server: ServerProcess, data_path: Path, config: SoakConfig, progress: Callable[[str], None] = print
) -> dict[str, Any]:
    """Run the load against ``server`` (fresh, on ``data_path``) and return the figures and the checks."""
    load_seconds = config.minutes * 60
    shape = LoadShape(
        queue=f"soak-{uuid.uuid4().hex[:8]}",
        rate=config.rate,
        total=int(config.rate * load_seconds),
        push_batch=config.push_batch,
        pull_count=config.pull_count,
        data_bytes=config.data_bytes,
        durable=config.durable,
    )
    tally = Tally(shape.total)
    conns = list(await asyncio.gather(*(connect(*server.addr) for _ in range(config.workers + 2))))
    control, producer, workers = conns[0], conns[1], conns[2:]
    sampler = Sampler(server, control, shape.queue, data_path, tally)
    progress(progress_line(await sampler.take()))
    sampling = asyncio.create_task(sampler.every(config.sample_seconds, progress))
    stop = asyncio.Event()
    working = [asyncio.create_task(work(c, shape, f"soak-worker-{i}", tally, stop)) for i, c in enumerate(workers)]
    try:
        started = sampler.started
        await produce(producer, shape, tally, started)
        pushing_seconds = time.monotonic() - started
        await asyncio.sleep(max(0.0, started + load_seconds - time.monotonic()))
        completed_in_load = tally.completed
        backlog_seconds = (tally.pushed - tally.completed) / max(config.rate, 1.0)
        drain_started = time.monotonic()
        # The load's length: longer than asked when the producer fell behind.
        load_elapsed = drain_started - started
        await _drain(tally, drain_started + backlog_seconds + DRAIN_GRACE_SECONDS)
        drain_seconds = time.monotonic() - drain_started
        stop.set()
        await asyncio.gather(*working)
        sampling.cancel()
        final = await sampler.take()
        progress(progress_line(final))
        counts = (await control.request({"cmd": "GetJobCounts", "queue": shape.queue}))["counts"]
    finally:
        for task in (sampling, *working):
            task.cancel()
        await asyncio.gather(*(c.close() for c in conns), return_exceptions=True)
    left = {state: counts[state] for state in PENDING_STATES if counts.get(state)}
    memory = memory_figures(sampler.samples, load_seconds)
    load_samples = [s for s in sampler.samples[1:] if s.seconds <= load_seconds + 0.5]
    result: dict[str, Any] = {
        "config": asdict(config),
        "planned": shape.total,
        "pushed": tally.pushed,
        "completed": tally.completed,
        "completed_twice": tally.completed_twice(),
        "never_completed": tally.never_completed(),
        "acks_refused": tally.acks_refused,
        "unknown_seq": tally.unknown_seq,
        "left_on_server": left,
        "push_rate": round(tally.pushed / pushing_seconds, 1),
        "completion_rate": round(completed_in_load / load_elapsed, 1),
        "drain_seconds": round(drain_seconds, 1),
        "server_cpu": round(sum(s.server_cpu for s in load_samples) / max(len(load_samples), 1), 2),
        "client_cpu": round(sum(s.client_cpu for s in load_samples) / max(len(load_samples), 1), 2),
        **memory,
        "backlog_max": max(s.waiting + s.active for s in sampler.samples),
        "file_half_mb": min(sampler.samples, key=lambda s: abs(s.seconds - load_seconds / 2)).file_mb,
        "file_mb": final.file_mb,
        "wal_mb": round(sampler.wal_mb(), 2),
        "samples": [asdict(s) for s in sampler.samples],
    }
    result["checks"] = {
        "every_job_once": result["completed_twice"] == 0 and result["never_completed"] == 0
        and result["unknown_seq"] == 0,
        "no_ack_refused": tally.acks_refused == 0,
        "nothing_left_on_server": not left,
        "rate_reached": result["completion_rate"] >= RATE_FLOOR * config.rate,
        "memory_flat": memory["memory_flat"],
    }
    return result


def run(config: SoakConfig, progress: Callable[[str], None] = print) -> dict[str, Any]:
    """Start a fresh SQLite server in a temporary directory, soak it, stop it; the result of :func:`soak`."""
    with tempfile.TemporaryDirectory(prefix="bunqueue-soak-") as tmp:
        data_path = Path(tmp) / "soak.db"
        env = {"BUNQUEUE_DATA_PATH": str(data_path), "RATE_LIMIT_MAX_REQUESTS": "0"}
        with open(Path(tmp) / "server.log", "wb") as log:
            server = ServerProcess(env=env, output=log).start()
            try:
                result = asyncio.run(soak(server, data_path, config, progress))
                alive = server.proc is not None and server.proc.poll() is None
            finally:
                exit_code = server.stop(timeout=120)
        result["checks"]["server_alive_and_stopped_cleanly"] = alive and exit_code == 0
        result["ok"] = all(result["checks"].values())
        if not result["ok"]:
            result["server_log_tail"] = (Path(tmp) / "server.log").read_text(errors="replace")[-4000:]
    return result


def table(result: dict[str, Any]) -> str:
    c = result["config"]
    rows = [
        ("load", f"{c['minutes']:g} min at {c['rate']:,.0f} jobs/s, {c['workers']} workers, "
         f"{'durable' if c['durable'] else 'ordinary'} PUSHB {c['push_batch']}, PULLB {c['pull_count']}"),
        ("jobs pushed", f"{result['pushed']:,} of {result['planned']:,}"),
        ("completed", f"{result['completed']:,}"),
        ("completed twice", f"{result['completed_twice']:,}"),
        ("never completed after the drain", f"{result['never_completed']:,}"),
        ("ACKs refused", f"{result['acks_refused']:,}"),
        ("left on the server", str(result["left_on_server"] or "none")),
        ("achieved rate", f"push {result['push_rate']:,.0f}, completion {result['completion_rate']:,.0f} jobs/s"),
        ("drain after the load", f"{result['drain_seconds']} s (largest backlog sampled {result['backlog_max']:,})"),
        ("server CPU (mean)", f"{result['server_cpu']:.0%} of a core (client {result['client_cpu']:.0%})"),
        ("RSS start / half / max / end", f"{result['rss_start_mb']} / {result['rss_half_mb']} / "
         f"{result['rss_max_mb']} / {result['rss_end_mb']} MB"),
        ("RSS slope, second half", f"{result['rss_slope_mb_per_10min']} MB per 10 min "
         f"({result['rss_second_half_samples']} samples): projected {result['rss_projected_growth_mb']} MB, "
         f"bound {result['rss_growth_bound_mb']} MB"),
        ("data file + WAL, half / end", f"{result['file_half_mb']} / {result['file_mb']} MB "
         f"(WAL {result['wal_mb']} MB)"),
    ]
    rows += [(f"check: {name}", "ok" if passed else "FAILED") for name, passed in result["checks"].items()]
    width = max(len(name) for name, _ in rows)
    return "\n".join(f"{name:<{width}}  {value}" for name, value in rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0, help="length of the load")
    parser.add_argument("--rate", type=float, default=5000.0, help="jobs pushed per second")
    parser.add_argument("--workers", type=int, default=20, help="worker connections")
    parser.add_argument("--push-batch", type=int, default=100, help="jobs per PUSHB")
    parser.add_argument("--pull-count", type=int, default=10, help="jobs per PULLB")
    parser.add_argument("--data-bytes", type=int, default=64, help="payload bytes per job beside its seq")
    parser.add_argument("--durable", action="store_true", help="push with durable: true (replies after commit)")
    parser.add_argument("--sample-seconds", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON object")
    args = parser.parse_args(argv)
    config = SoakConfig(
        minutes=args.minutes, rate=args.rate, workers=args.workers, push_batch=args.push_batch,
        pull_count=args.pull_count, data_bytes=args.data_bytes, durable=args.durable,
        sample_seconds=args.sample_seconds,
    )
    progress: Callable[[str], None] = (lambda line: print(line, file=sys.stderr, flush=True)) if args.json else (
        lambda line: print(line, flush=True))
    try:
        result = run(config, progress)
    except SoakError as exc:
        print(f"soak failed: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result) if args.json else table(result))
    if not result["ok"] and not args.json:
        print(result.get("server_log_tail", ""), file=sys.stderr)
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

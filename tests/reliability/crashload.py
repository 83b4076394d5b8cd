"""A producer/consumer load against a SQLite server that is killed with SIGKILL at random moments.

The load mixes PUSH and PUSHB (durable, buffered and delayed jobs), PULL with ACK or FAIL (a failed job is
retried), PUSHF graphs whose children and then parents are pulled and acknowledged, and a cron whose jobs
are pulled and acknowledged. Producers wait while their queue's backlog is above BACKLOG_MAX, so consumers
keep up and the file (and each restart) stays small over hundreds of kills, and every round does work until
its kill. Every acknowledgement the client receives is written to a history; after the last restart the
queue is drained and the history checked: no acknowledged durable push may be missing, no job may be
delivered again after its ACK was acknowledged or completed twice, buffered pushes may be lost only inside
the documented window, no parent may be pulled before all its children completed, and the cron outlives
every kill.

Run directly for a long run: ``nice python tests/reliability/crashload.py --kills 500 --seed 11``.
"""
from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import sqlite3
import sys
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bunqueue._testbase.server import ServerProcess
from bunqueue.client import connect
from bunqueue.client.connection import Connection

QUEUE = "crash"
# PUSHF graphs: a parent in FLOW_PARENTS waits for its children in FLOW_CHILDREN.
FLOW_PARENTS = "crash-fp"
FLOW_CHILDREN = "crash-fc"
# A cron that fires every CRON_EVERY_MS into its own queue.
CRON = "crash-cron"
CRON_EVERY_MS = 100
# Buffered (non-durable) pushes acknowledged at most this long before a kill may be lost.
BUFFER_LOSS_WINDOW_MS = 250.0
# A producer pushes only while its queue holds at most this many jobs not yet pulled (Count).
BACKLOG_MAX = 200
BACKLOG_POLL_S = 0.005
# Each round lasts a random time in this range (seconds), then at least until it pushed and completed a job.
ROUND_S = (0.05, 0.4)
ROUND_WORK_TIMEOUT_S = 10.0
# Every FAIL_EVERY-th pull of a consumer is failed (once per job) instead of acknowledged.
FAIL_EVERY = 5


@dataclass
class History:
    # Job id -> (round, time the push was acknowledged): a reply already on its way when the server was
    # killed is read after the kill, so losses are measured against the kill of the job's own round.
    durable: dict[str, tuple[int, float]] = field(default_factory=dict)
    buffered: dict[str, tuple[int, float]] = field(default_factory=dict)
    # Acknowledged pushes by command (PUSHF counts the jobs of acknowledged graphs).
    pushed_by: Counter[str] = field(default_factory=Counter)
    acked: set[str] = field(default_factory=set)
    # Job id -> how many of its completions (ACK, ACKB) were acknowledged; more than one is a defect.
    completions: Counter[str] = field(default_factory=Counter)
    # Jobs whose FAIL was acknowledged (each is failed once, then retried), and delayed pushes.
    failed: set[str] = field(default_factory=set)
    delayed: int = 0
    cron_completed: int = 0
    redelivered_after_ack: list[str] = field(default_factory=list)
    kills: list[float] = field(default_factory=list)
    # Per round: acknowledged pushes and completions before its kill.
    round_pushes: list[int] = field(default_factory=list)
    round_completions: list[int] = field(default_factory=list)
    # Parent id -> its children's ids, for every PUSHF sent; the acknowledged ones by parent id.
    graphs: dict[str, list[str]] = field(default_factory=dict)
    graphs_acked: set[str] = field(default_factory=set)
    # Children pulled while the server did not know their parent: a graph visible in part.
    orphan_pulls: list[str] = field(default_factory=list)
    # Parents pulled while one of their children was not completed.
    early_parents: list[str] = field(default_factory=list)
    parents_completed: int = 0

    def pushed(self, ids: list[str], durable: bool, kind: str, delayed: bool, round_no: int) -> None:
        book = self.durable if durable else self.buffered
        at = (round_no, now_ms())
        for job_id in ids:
            book[job_id] = at
        self.pushed_by[kind] += len(ids)
        self.delayed += len(ids) if delayed else 0
        if round_no < len(self.round_pushes):
            self.round_pushes[round_no] += len(ids)

    def delivered(self, job_id: str) -> None:
        if job_id in self.acked:
            self.redelivered_after_ack.append(job_id)

    def completed(self, job_id: str) -> None:
        self.acked.add(job_id)
        self.completions[job_id] += 1
        if self.round_completions:
            self.round_completions[-1] += 1


def now_ms() -> float:
    return time.time() * 1000.0


async def wait_for_room(conn: Connection, queue: str, stop: asyncio.Event) -> None:
    """Return once ``queue`` holds at most BACKLOG_MAX jobs not yet pulled (or the round is over)."""
    while not stop.is_set():
        reply = await conn.request({"cmd": "Count", "queue": queue})
        if reply.get("count", 0) <= BACKLOG_MAX:
            return
        await asyncio.sleep(BACKLOG_POLL_S)


def job_fields(n: int, durable: bool, delayed: bool) -> dict[str, Any]:
    # Delayed jobs must survive the kill in the delayed set; 1000 attempts without backoff retry a FAIL at once.
    return {"name": "j", "data": {"n": n}, "durable": durable, "maxAttempts": 1000, "backoff": 0,
            **({"delay": 50} if delayed else {})}


async def produce_batches(addr: tuple[str, int], history: History, stop: asyncio.Event, round_no: int) -> None:
    conn = await connect(*addr)
    try:
        n = 0
        while not stop.is_set():
            await wait_for_room(conn, QUEUE, stop)
            # Every other batch is durable, every other durable batch delayed.
            durable, delayed = n % 10 == 0, n % 20 == 0
            batch = [job_fields(n + i, durable, delayed) for i in range(5)]
            n += 5
            reply = await conn.request({"cmd": "PUSHB", "queue": QUEUE, "jobs": batch})
            if reply.get("ok"):
                history.pushed(reply["ids"], durable, "PUSHB", delayed, round_no)
    except (ConnectionError, OSError):
        pass
    finally:
        conn.abort()


async def produce_singles(addr: tuple[str, int], history: History, stop: asyncio.Event, round_no: int) -> None:
    conn = await connect(*addr)
    try:
        n = 0
        while not stop.is_set():
            await wait_for_room(conn, QUEUE, stop)
            durable, delayed = n % 2 == 0, n % 4 == 0
            n += 1
            reply = await conn.request({"cmd": "PUSH", "queue": QUEUE, **job_fields(n, durable, delayed)})
            if reply.get("ok"):
                history.pushed([reply["id"]], durable, "PUSH", delayed, round_no)
    except (ConnectionError, OSError):
        pass
    finally:
        conn.abort()


async def consume(addr: tuple[str, int], history: History, stop: asyncio.Event) -> None:
    conn = await connect(*addr)
    try:
        pulls = 0
        while not stop.is_set():
            reply = await conn.request({"cmd": "PULL", "queue": QUEUE, "owner": "w", "lockTtl": 60000,
                                        "timeout": 50})
            job = reply.get("job")
            if not job:
                continue
            pulls += 1
            history.delivered(job["id"])
            if job["id"] not in history.failed and pulls % FAIL_EVERY == 0:
                failure = await conn.request({"cmd": "FAIL", "id": job["id"], "token": reply["token"],
                                              "error": "crash-load"})
                if failure.get("ok"):
                    history.failed.add(job["id"])
                continue
            ack = await conn.request({"cmd": "ACK", "id": job["id"], "token": reply["token"]})
            if ack.get("ok"):
                history.completed(job["id"])
    except (ConnectionError, OSError):
        pass
    finally:
        conn.abort()


def flow_graph(parent: str, kids: list[str]) -> dict[str, object]:
    jobs: list[dict[str, object]] = [{"id": parent, "queue": FLOW_PARENTS, "input": {
        "name": "p", "data": {"__childrenIds": kids}, "childrenIds": kids, "dependsOn": kids}}]
    jobs += [{"id": kid, "queue": FLOW_CHILDREN, "input": {
        "name": "k", "data": {"__parentId": parent, "__parentQueue": FLOW_PARENTS}, "parentId": parent}}
        for kid in kids]
    return {"cmd": "PUSHF", "jobs": jobs}


async def produce_flows(addr: tuple[str, int], history: History, stop: asyncio.Event, round_no: int,
                        rng: random.Random) -> None:
    conn = await connect(*addr)
    try:
        n = 0
        while not stop.is_set():
            # Parents released by their children wait in their own queue: both backlogs are bounded.
            await wait_for_room(conn, FLOW_CHILDREN, stop)
            await wait_for_room(conn, FLOW_PARENTS, stop)
            parent = f"g{round_no}-{n}"
            kids = [f"{parent}-{i}" for i in range(rng.randint(1, 8))]
            n += 1
            # Recorded before sending: a graph whose reply never came must still be all or nothing.
            history.graphs[parent] = kids
            reply = await conn.request(flow_graph(parent, kids))
            if reply.get("ok"):
                history.graphs_acked.add(parent)
                history.pushed_by["PUSHF"] += 1 + len(kids)
    except (ConnectionError, OSError):
        pass
    finally:
        conn.abort()


async def consume_flows(addr: tuple[str, int], history: History, stop: asyncio.Event) -> None:
    conn = await connect(*addr)
    try:
        while not stop.is_set():
            reply = await conn.request({"cmd": "PULLB", "queue": FLOW_CHILDREN, "count": 8, "timeout": 50})
            jobs = reply.get("jobs") or []
            if not jobs:
                continue
            parents = await conn.pipeline([{"cmd": "GetState", "id": job["parentId"]} for job in jobs])
            history.orphan_pulls += [job["id"] for job, r in zip(jobs, parents) if r.get("state") == "unknown"]
            ids = [job["id"] for job in jobs]
            for job_id in ids:
                history.delivered(job_id)
            ack = await conn.request({"cmd": "ACKB", "ids": ids})
            if ack.get("ok"):
                for job_id in ids:
                    history.completed(job_id)
    except (ConnectionError, OSError):
        pass
    finally:
        conn.abort()


async def consume_parents(addr: tuple[str, int], history: History, stop: asyncio.Event) -> None:
    """Pull the parents whose children all completed, check that they did, and acknowledge them."""
    conn = await connect(*addr)
    try:
        while not stop.is_set():
            reply = await conn.request({"cmd": "PULL", "queue": FLOW_PARENTS, "owner": "p", "lockTtl": 60000,
                                        "timeout": 50})
            job = reply.get("job")
            if not job:
                continue
            history.delivered(job["id"])
            kids = history.graphs.get(job["id"], [])
            states = await conn.pipeline([{"cmd": "GetState", "id": kid} for kid in kids])
            if any(r.get("state") != "completed" for r in states):
                history.early_parents.append(job["id"])
            ack = await conn.request({"cmd": "ACK", "id": job["id"], "token": reply["token"]})
            if ack.get("ok"):
                history.completed(job["id"])
                history.parents_completed += 1
    except (ConnectionError, OSError):
        pass
    finally:
        conn.abort()


async def consume_cron(addr: tuple[str, int], history: History, stop: asyncio.Event) -> None:
    conn = await connect(*addr)
    try:
        while not stop.is_set():
            reply = await conn.request({"cmd": "PULL", "queue": CRON, "owner": "c", "timeout": 50})
            job = reply.get("job")
            if not job:
                continue
            history.delivered(job["id"])
            ack = await conn.request({"cmd": "ACK", "id": job["id"], "token": reply["token"]})
            if ack.get("ok"):
                history.completed(job["id"])
                history.cron_completed += 1
    except (ConnectionError, OSError):
        pass
    finally:
        conn.abort()


async def one_round(proc: ServerProcess, history: History, rng: random.Random) -> None:
    stop = asyncio.Event()
    round_no = len(history.kills)
    history.round_pushes.append(0)
    history.round_completions.append(0)
    if round_no == 0:
        conn = await connect(*proc.addr)
        reply = await conn.request({"cmd": "Cron", "name": CRON, "queue": CRON, "repeatEvery": CRON_EVERY_MS,
                                    "data": {}})
        assert reply.get("ok"), reply
        await conn.close()
    tasks = [asyncio.create_task(produce_batches(proc.addr, history, stop, round_no)),
             asyncio.create_task(produce_singles(proc.addr, history, stop, round_no)),
             asyncio.create_task(produce_flows(proc.addr, history, stop, round_no, rng)),
             asyncio.create_task(consume_flows(proc.addr, history, stop)),
             asyncio.create_task(consume_parents(proc.addr, history, stop)),
             asyncio.create_task(consume_cron(proc.addr, history, stop))]
    tasks += [asyncio.create_task(consume(proc.addr, history, stop)) for _ in range(3)]
    await asyncio.sleep(rng.uniform(*ROUND_S))
    # A round killed before it pushed and completed anything would test only the restart.
    deadline = time.monotonic() + ROUND_WORK_TIMEOUT_S
    while 0 in (history.round_pushes[-1], history.round_completions[-1]) and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    assert proc.proc is not None
    os.kill(proc.proc.pid, signal.SIGKILL)
    history.kills.append(now_ms())
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    proc.proc.wait()


async def drain(addr: tuple[str, int], history: History) -> set[str]:
    """Pull everything left; returns the ids of jobs still known to the server (any state)."""
    conn = await connect(*addr)
    try:
        idle = 0
        while idle < 3:
            reply = await conn.request({"cmd": "PULLB", "queue": QUEUE, "count": 500, "owner": "d",
                                        "timeout": 200})
            assert reply.get("ok"), reply
            if not reply["jobs"]:
                idle += 1
                continue
            idle = 0
            for job in reply["jobs"]:
                history.delivered(job["id"])
            ids = [job["id"] for job in reply["jobs"]]
            ack = await conn.request({"cmd": "ACKB", "ids": ids, "tokens": reply["tokens"]})
            assert ack["ok"], ack
            for job_id in ids:
                history.completed(job_id)
        known: set[str] = set()
        pushed = list(history.durable) + list(history.buffered)
        for i in range(0, len(pushed), 500):
            replies = await conn.pipeline([{"cmd": "GetState", "id": j} for j in pushed[i : i + 500]])
            known.update(j for j, r in zip(pushed[i : i + 500], replies) if r["state"] != "unknown")
        return known
    finally:
        await conn.close()


@dataclass
class FlowVerdict:
    graphs_sent: int
    graphs_acked: int
    # Graphs of which the server knows some members but not all.
    partial: int
    acked_missing: int
    # Parents still waiting for children that have all completed.
    stuck_parents: int
    orphan_pulls: int
    parents_completed: int = 0
    # Parents pulled while one of their children was not completed.
    early_parents: int = 0


def graph_chunks(graphs: dict[str, list[str]], size: int = 500) -> Iterator[list[tuple[str, list[str]]]]:
    """The graphs in groups of about ``size`` members, one pipeline each."""
    chunk: list[tuple[str, list[str]]] = []
    members = 0
    for parent, kids in graphs.items():
        chunk.append((parent, kids))
        members += 1 + len(kids)
        if members >= size:
            yield chunk
            chunk, members = [], 0
    if chunk:
        yield chunk


async def check_flows(addr: tuple[str, int], history: History) -> FlowVerdict:
    conn = await connect(*addr)
    try:
        partial = missing = stuck = 0
        for chunk in graph_chunks(history.graphs):
            replies = iter(await conn.pipeline(
                [{"cmd": "GetState", "id": j} for parent, kids in chunk for j in (parent, *kids)]))
            for parent, kids in chunk:
                states = [next(replies)["state"] for _ in range(1 + len(kids))]
                known = sum(state != "unknown" for state in states)
                if 0 < known < len(states):
                    partial += 1
                if parent in history.graphs_acked and known < len(states):
                    missing += 1
                if states[0] == "waiting-children" and all(state == "completed" for state in states[1:]):
                    stuck += 1
        return FlowVerdict(len(history.graphs), len(history.graphs_acked), partial, missing, stuck,
                           len(history.orphan_pulls), history.parents_completed, len(history.early_parents))
    finally:
        await conn.close()


@dataclass
class Verdict:
    kills: int
    durable_pushed: int
    buffered_pushed: int
    # Acknowledged pushes by command: PUSH, PUSHB, PUSHF (jobs of acknowledged graphs).
    pushed_by: dict[str, int]
    acked: int
    durable_missing: int
    redelivered_after_ack: int
    buffered_missing: int
    buffered_missing_outside_window: int
    worst_buffered_loss_ms: float
    integrity: str
    failed: int
    # Failed jobs later completed: the FAIL was retried.
    failed_then_completed: int
    delayed_pushed: int
    # Jobs whose completion was acknowledged twice.
    double_completed: int
    cron_completed: int
    # The fewest acknowledged pushes and completions of any round before its kill.
    fewest_round_pushes: int
    fewest_round_completions: int
    # Whether the cron is still registered after the last kill.
    cron_alive: bool = False
    flows: FlowVerdict | None = None
    data_file_mb: float = 0.0
    seconds: float = 0.0


def check(history: History, known: set[str], data: Path) -> Verdict:
    durable_missing = [j for j in history.durable if j not in known]
    buffered_missing = [j for j in history.buffered if j not in known]
    worst = 0.0
    outside = 0
    for job_id in buffered_missing:
        round_no, at = history.buffered[job_id]
        gap = max(0.0, history.kills[round_no] - at) if round_no < len(history.kills) else float("inf")
        worst = max(worst, gap)
        if gap > BUFFER_LOSS_WINDOW_MS:
            outside += 1
    with sqlite3.connect(data) as conn:
        integrity = conn.execute("PRAGMA integrity_check").fetchone()[0]
    return Verdict(
        kills=len(history.kills),
        durable_pushed=len(history.durable),
        buffered_pushed=len(history.buffered),
        pushed_by=dict(history.pushed_by),
        acked=len(history.acked),
        durable_missing=len(durable_missing),
        redelivered_after_ack=len(history.redelivered_after_ack),
        buffered_missing=len(buffered_missing),
        buffered_missing_outside_window=outside,
        worst_buffered_loss_ms=round(worst, 1),
        integrity=integrity,
        failed=len(history.failed),
        failed_then_completed=len(history.failed & history.acked),
        delayed_pushed=history.delayed,
        double_completed=sum(n > 1 for n in history.completions.values()),
        cron_completed=history.cron_completed,
        fewest_round_pushes=min(history.round_pushes, default=0),
        fewest_round_completions=min(history.round_completions, default=0),
        data_file_mb=round(data.stat().st_size / 1e6, 1),
    )


async def run(kills: int, workdir: Path, seed: int = 1, progress: bool = False) -> Verdict:
    started = time.monotonic()
    rng = random.Random(seed)
    workdir.mkdir(parents=True, exist_ok=True)
    data = workdir / "crash.db"
    history = History()
    env = {"BUNQUEUE_DATA_PATH": str(data), "RATE_LIMIT_MAX_REQUESTS": "0"}
    for i in range(kills):
        proc = ServerProcess(env=env).start()
        await one_round(proc, history, rng)
        if progress:
            print(f"kill {i + 1}/{kills} at {time.monotonic() - started:.0f} s:"
                  f" {len(history.durable) + len(history.buffered)} pushed, {len(history.acked)} acked",
                  file=sys.stderr, flush=True)
    proc = ServerProcess(env=env).start()
    try:
        known = await drain(proc.addr, history)
        flows = await check_flows(proc.addr, history)
        conn = await connect(*proc.addr)
        cron = await conn.request({"cmd": "CronGet", "name": CRON})
        await conn.close()
    finally:
        proc.stop()
    verdict = check(history, known, data)
    verdict.flows = flows
    verdict.cron_alive = bool(cron.get("ok") and cron.get("cron"))
    verdict.seconds = round(time.monotonic() - started, 1)
    return verdict


def passed(verdict: Verdict) -> bool:
    flows = verdict.flows
    return (verdict.durable_missing == 0 and verdict.redelivered_after_ack == 0
            and verdict.buffered_missing_outside_window == 0 and verdict.integrity == "ok"
            and verdict.double_completed == 0 and verdict.cron_alive
            and flows is not None and flows.partial == flows.acked_missing == flows.stuck_parents == 0
            and flows.orphan_pulls == flows.early_parents == 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    import tempfile

    workdir = Path(args.dir or tempfile.mkdtemp(prefix="bunqueue-crash-"))
    verdict = asyncio.run(run(args.kills, workdir, args.seed, progress=True))
    for key, value in vars(verdict).items():
        print(f"{key:34} {value}")
    ok = passed(verdict)
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

"""A producer/consumer load against a SQLite server that is killed with SIGKILL at random moments.

The load mixes PUSHB (durable, buffered and delayed jobs), PULL with ACK or FAIL (a failed job is retried),
PUSHF graphs and a cron whose jobs are pulled and acknowledged. Every acknowledgement the client receives
is written to a history; after the last restart the queue is drained and the history checked: no
acknowledged durable push may be missing, no job may be delivered again after its ACK was acknowledged or
completed twice, a job whose FAIL was acknowledged must come back with its failure, buffered pushes may be
lost only inside the documented window, and the cron outlives every kill.

Run directly for a long run: ``python tests/reliability/crashload.py --kills 300``.
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
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from bunqueue._testbase.server import ServerProcess
from bunqueue.client import connect

QUEUE = "crash"
# PUSHF graphs: a parent in FLOW_PARENTS waits for its children in FLOW_CHILDREN.
FLOW_PARENTS = "crash-fp"
FLOW_CHILDREN = "crash-fc"
# A cron that fires every CRON_EVERY_MS into its own queue.
CRON = "crash-cron"
CRON_EVERY_MS = 100
# Buffered (non-durable) pushes acknowledged at most this long before a kill may be lost.
BUFFER_LOSS_WINDOW_MS = 250.0
# The stack a FAIL sends: a job delivered after its FAIL was acknowledged must carry it.
FAIL_STACK = ["crash-load"]


@dataclass
class History:
    # Job id -> (round, time the push was acknowledged): a reply already on its way when the server was
    # killed is read after the kill, so losses are measured against the kill of the job's own round.
    durable: dict[str, tuple[int, float]] = field(default_factory=dict)
    buffered: dict[str, tuple[int, float]] = field(default_factory=dict)
    acked: set[str] = field(default_factory=set)
    # Job id -> (round, time its ACK was acknowledged), as for pushes.
    acked_at: dict[str, tuple[int, float]] = field(default_factory=dict)
    # Job id -> how many of its completions (ACK, ACKB) were acknowledged; more than one is a defect.
    completions: Counter[str] = field(default_factory=Counter)
    # Jobs whose FAIL was acknowledged (each is failed once, then retried) -> (round, time), and delayed pushes.
    failed: dict[str, tuple[int, float]] = field(default_factory=dict)
    # Job id -> whether its latest delivery carried FAIL_STACK.
    failure_seen: dict[str, bool] = field(default_factory=dict)
    delayed: int = 0
    cron_completed: int = 0
    redelivered_after_ack: list[str] = field(default_factory=list)
    kills: list[float] = field(default_factory=list)
    # Parent id -> its children's ids, for every PUSHF sent; the acknowledged ones by parent id.
    graphs: dict[str, list[str]] = field(default_factory=dict)
    graphs_acked: set[str] = field(default_factory=set)
    # Children pulled while the server did not know their parent: a graph visible in part.
    orphan_pulls: list[str] = field(default_factory=list)
    # The pushed jobs the server still knew after the last restart and the drain.
    known: set[str] = field(default_factory=set)

    def delivered(self, job: dict[str, object]) -> None:
        job_id = str(job["id"])
        if job_id in self.acked:
            self.redelivered_after_ack.append(job_id)
        self.failure_seen[job_id] = job.get("stacktrace") == FAIL_STACK

    def completed(self, job_id: str, round_no: int) -> None:
        self.acked.add(job_id)
        # The first: an ACK undone by a power loss is acknowledged again after the job comes back.
        self.acked_at.setdefault(job_id, (round_no, now_ms()))
        self.completions[job_id] += 1

    def failures_lost(self) -> list[str]:
        """Jobs whose FAIL was acknowledged but whose latest delivery does not show it."""
        return [job_id for job_id in self.failed if not self.failure_seen.get(job_id, False)]


def now_ms() -> float:
    return time.time() * 1000.0


async def produce(addr: tuple[str, int], history: History, stop: asyncio.Event, round_no: int) -> None:
    conn = await connect(*addr)
    try:
        n = 0
        while not stop.is_set():
            durable = n % 10 == 0
            # Every other durable batch is delayed: it must survive the kill in the delayed set.
            delay = {"delay": 50} if n % 20 == 0 else {}
            batch = [
                {"name": "j", "data": {"n": n + i}, "durable": durable, "maxAttempts": 1000, "backoff": 0,
                 **delay}
                for i in range(5)
            ]
            n += 5
            reply = await conn.request({"cmd": "PUSHB", "queue": QUEUE, "jobs": batch})
            if not reply.get("ok"):
                continue
            book = history.durable if durable else history.buffered
            history.delayed += len(reply["ids"]) if delay else 0
            at = (round_no, now_ms())
            for job_id in reply["ids"]:
                book[job_id] = at
    except (ConnectionError, OSError):
        pass
    finally:
        conn.abort()


async def consume(addr: tuple[str, int], history: History, stop: asyncio.Event, round_no: int) -> None:
    conn = await connect(*addr)
    try:
        while not stop.is_set():
            reply = await conn.request({"cmd": "PULL", "queue": QUEUE, "owner": "w", "lockTtl": 60000,
                                        "timeout": 50})
            job = reply.get("job")
            if not job:
                continue
            history.delivered(job)
            if job["id"] not in history.failed and len(history.acked) % 5 == 0:
                failure = await conn.request({"cmd": "FAIL", "id": job["id"], "token": reply["token"],
                                              "error": "crash-load", "stack": FAIL_STACK})
                if failure.get("ok"):
                    history.failed[job["id"]] = (round_no, now_ms())
                continue
            ack = await conn.request({"cmd": "ACK", "id": job["id"], "token": reply["token"]})
            if ack.get("ok"):
                history.completed(job["id"], round_no)
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
            parent = f"g{round_no}-{n}"
            kids = [f"{parent}-{i}" for i in range(rng.randint(1, 8))]
            n += 1
            # Recorded before sending: a graph whose reply never came must still be all or nothing.
            history.graphs[parent] = kids
            reply = await conn.request(flow_graph(parent, kids))
            if reply.get("ok"):
                history.graphs_acked.add(parent)
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
            await conn.request({"cmd": "ACKB", "ids": [job["id"] for job in jobs]})
    except (ConnectionError, OSError):
        pass
    finally:
        conn.abort()


async def consume_cron(addr: tuple[str, int], history: History, stop: asyncio.Event, round_no: int) -> None:
    conn = await connect(*addr)
    try:
        while not stop.is_set():
            reply = await conn.request({"cmd": "PULL", "queue": CRON, "owner": "c", "timeout": 50})
            job = reply.get("job")
            if not job:
                continue
            history.delivered(job)
            ack = await conn.request({"cmd": "ACK", "id": job["id"], "token": reply["token"]})
            if ack.get("ok"):
                history.completed(job["id"], round_no)
                history.cron_completed += 1
    except (ConnectionError, OSError):
        pass
    finally:
        conn.abort()


async def one_round(proc: ServerProcess, history: History, rng: random.Random,
                    seconds: tuple[float, float] = (0.1, 0.6)) -> None:
    stop = asyncio.Event()
    round_no = len(history.kills)
    if round_no == 0:
        conn = await connect(*proc.addr)
        reply = await conn.request({"cmd": "Cron", "name": CRON, "queue": CRON, "repeatEvery": CRON_EVERY_MS,
                                    "data": {}})
        assert reply.get("ok"), reply
        await conn.close()
    tasks = [asyncio.create_task(produce(proc.addr, history, stop, round_no)) for _ in range(2)]
    tasks += [asyncio.create_task(consume(proc.addr, history, stop, round_no)) for _ in range(3)]
    tasks.append(asyncio.create_task(produce_flows(proc.addr, history, stop, round_no, rng)))
    tasks.append(asyncio.create_task(consume_flows(proc.addr, history, stop)))
    tasks.append(asyncio.create_task(consume_cron(proc.addr, history, stop, round_no)))
    await asyncio.sleep(rng.uniform(*seconds))
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
                history.delivered(job)
            ids = [job["id"] for job in reply["jobs"]]
            ack = await conn.request({"cmd": "ACKB", "ids": ids, "tokens": reply["tokens"]})
            assert ack["ok"], ack
            for job_id in ids:
                history.completed(job_id, len(history.kills))
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


async def check_flows(addr: tuple[str, int], history: History) -> FlowVerdict:
    conn = await connect(*addr)
    try:
        partial = missing = stuck = 0
        for parent, kids in history.graphs.items():
            replies = await conn.pipeline([{"cmd": "GetState", "id": j} for j in (parent, *kids)])
            states = [r["state"] for r in replies]
            known = sum(state != "unknown" for state in states)
            if 0 < known < len(states):
                partial += 1
            if parent in history.graphs_acked and known < len(states):
                missing += 1
            if states[0] == "waiting-children" and all(state == "completed" for state in states[1:]):
                stuck += 1
        return FlowVerdict(len(history.graphs), len(history.graphs_acked), partial, missing, stuck,
                           len(history.orphan_pulls))
    finally:
        await conn.close()


@dataclass
class Verdict:
    kills: int
    durable_pushed: int
    buffered_pushed: int
    acked: int
    durable_missing: int
    redelivered_after_ack: int
    buffered_missing: int
    buffered_missing_outside_window: int
    worst_buffered_loss_ms: float
    integrity: str
    failed: int
    delayed_pushed: int
    # Jobs whose completion was acknowledged twice.
    double_completed: int
    # Jobs whose FAIL was acknowledged and later delivered without its failure (or never again).
    failures_lost: int
    cron_completed: int
    # Whether the cron is still registered after the last kill.
    cron_alive: bool = False
    flows: FlowVerdict | None = None


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
        acked=len(history.acked),
        durable_missing=len(durable_missing),
        redelivered_after_ack=len(history.redelivered_after_ack),
        buffered_missing=len(buffered_missing),
        buffered_missing_outside_window=outside,
        worst_buffered_loss_ms=round(worst, 1),
        integrity=integrity,
        failed=len(history.failed),
        delayed_pushed=history.delayed,
        double_completed=sum(n > 1 for n in history.completions.values()),
        failures_lost=len(history.failures_lost()),
        cron_completed=history.cron_completed,
    )


async def run(kills: int, workdir: Path, seed: int = 1, progress: bool = False,
              killed_env: Mapping[str, str] | None = None,
              after_kill: Callable[[History], None] | None = None, history: History | None = None,
              round_seconds: tuple[float, float] = (0.1, 0.6)) -> Verdict:
    """``killed_env`` is added to the environment of the servers that are killed; ``after_kill`` runs
    after each kill, before the next start (the power-loss test drops unsynced writes there); each server
    is killed after a random time within ``round_seconds``."""
    rng = random.Random(seed)
    data = workdir / "crash.db"
    history = History() if history is None else history
    env = {"BUNQUEUE_DATA_PATH": str(data), "RATE_LIMIT_MAX_REQUESTS": "0"}
    for i in range(kills):
        proc = ServerProcess(env={**env, **(killed_env or {})}).start()
        await one_round(proc, history, rng, round_seconds)
        if after_kill is not None:
            after_kill(history)
        if progress:
            print(f"kill {i + 1}/{kills}: {len(history.durable) + len(history.buffered)} pushed,"
                  f" {len(history.acked)} acked", file=sys.stderr)
    proc = ServerProcess(env=env).start()
    try:
        known = history.known = await drain(proc.addr, history)
        flows = await check_flows(proc.addr, history)
        conn = await connect(*proc.addr)
        cron = await conn.request({"cmd": "CronGet", "name": CRON})
        await conn.close()
    finally:
        proc.stop()
    verdict = check(history, known, data)
    verdict.flows = flows
    verdict.cron_alive = bool(cron.get("ok") and cron.get("cron"))
    return verdict


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
    flows = verdict.flows
    ok = (verdict.durable_missing == 0 and verdict.redelivered_after_ack == 0
          and verdict.buffered_missing_outside_window == 0 and verdict.integrity == "ok"
          and verdict.double_completed == 0 and verdict.failures_lost == 0 and verdict.cron_alive
          and flows is not None and flows.partial == flows.acked_missing == flows.stuck_parents == 0
          and flows.orphan_pulls == 0)
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()

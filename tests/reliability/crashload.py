"""A producer/consumer load against servers killed with SIGKILL at random moments: one SQLite server, or two
PostgreSQL-mode brokers in one namespace whose kills alternate between a broker and PostgreSQL itself.

The load mixes PUSH and PUSHB (durable, buffered and delayed jobs), PULL with ACK or FAIL (a failed job is
retried), PUSHF graphs and a cron whose jobs are pulled and acknowledged; its clients are spread over the
servers. Every acknowledgement the client receives is written to a history; an error reply is no
acknowledgement (an ACK or FAIL refused with ``Storage unavailable`` is sent again). After the last restart
the queue is drained and the history checked: no acknowledged push may be missing or left unworked, no job
may be delivered again after its ACK was acknowledged or completed twice, a job whose FAIL was acknowledged
must come back with its failure, buffered pushes may be lost only inside the documented window (in
PostgreSQL mode not at all: a push is answered after its commit), every reply comes within its limit, and
the cron outlives every kill. The targets (``crashtargets``) say what a kill is and how the store's own
consistency is checked.

Run directly for a long run: ``python tests/reliability/crashload.py --kills 300`` (SQLite) or
``python tests/reliability/crashload.py --postgres --kills 100``.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bunqueue.client import Connection, connect
from tests.reliability.crashtargets import (
    BUFFER_LOSS_WINDOW_MS,
    QUEUE,
    PostgresTarget,
    SqliteTarget,
    Target,
    now_ms,
)

__all__ = ["BUFFER_LOSS_WINDOW_MS", "History", "Verdict", "run", "run_on"]

# PUSHF graphs: a parent in FLOW_PARENTS waits for its children in FLOW_CHILDREN.
FLOW_PARENTS = "crash-fp"
FLOW_CHILDREN = "crash-fc"
# A cron that fires every CRON_EVERY_MS into its own queue.
CRON = "crash-cron"
CRON_EVERY_MS = 100
# The errors.storage_unavailable prefix: the command had no acknowledged effect.
UNAVAILABLE = "Storage unavailable"
# The stack a FAIL sends: a job delivered after its FAIL was acknowledged must carry it.
FAIL_STACK = ["crash-load"]
# Each round's load runs this long (a random time in the range, seconds) before its kill.
ROUND_SECONDS = (0.1, 0.6)


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
    single_pushes: int = 0
    cron_completed: int = 0
    redelivered_after_ack: list[str] = field(default_factory=list)
    kills: list[float] = field(default_factory=list)
    # Parent id -> its children's ids, for every PUSHF sent; the acknowledged ones by parent id.
    graphs: dict[str, list[str]] = field(default_factory=dict)
    graphs_acked: set[str] = field(default_factory=set)
    # Children pulled while the server did not know their parent: a graph visible in part.
    orphan_pulls: list[str] = field(default_factory=list)
    # Replies: the slowest, those not there within the target's limit, and those saying the store was away.
    slowest_reply_s: float = 0.0
    hangs: int = 0
    unavailable: int = 0
    # The pushed jobs the server still knew after the last restart and the drain.
    known: set[str] = field(default_factory=set)

    def delivered(self, job: dict[str, Any]) -> None:
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


class Load:
    """The load's clients over one target: each request timed against the target's reply limit."""

    def __init__(self, target: Target, history: History) -> None:
        self.target = target
        self.history = history

    async def ask(self, conn: Connection, frame: dict[str, Any]) -> dict[str, Any]:
        return (await self.ask_all(conn, [frame]))[0]

    async def ask_all(self, conn: Connection, frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.target.reply_limit_s):
                replies = await conn.pipeline(frames)
        except TimeoutError:
            self.history.hangs += 1
            raise ConnectionError("no reply within the limit") from None
        history = self.history
        history.slowest_reply_s = max(history.slowest_reply_s, time.monotonic() - started)
        history.unavailable += sum(str(r.get("error", "")).startswith(UNAVAILABLE) for r in replies)
        return replies

    async def settle(self, conn: Connection, frame: dict[str, Any], stop: asyncio.Event) -> dict[str, Any]:
        """An ACK or FAIL, sent again while the store is away: its lease is still the worker's."""
        reply = await self.ask(conn, frame)
        while await away(reply) and not stop.is_set():
            reply = await self.ask(conn, frame)
        return reply

    async def produce(self, addr: tuple[str, int], stop: asyncio.Event, round_no: int) -> None:
        conn = await connect(*addr)
        history = self.history
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
                single = n % 15 == 5
                n += 5
                if single:
                    replies = await self.ask_all(conn, [{"cmd": "PUSH", "queue": QUEUE, **job} for job in batch])
                    ids = [r["id"] for r in replies if r.get("ok")]
                    history.single_pushes += len(ids)
                    await away(replies[-1])
                else:
                    reply = await self.ask(conn, {"cmd": "PUSHB", "queue": QUEUE, "jobs": batch})
                    ids = reply["ids"] if reply.get("ok") else []
                    await away(reply)
                book = history.durable if durable else history.buffered
                history.delayed += len(ids) if delay else 0
                at = (round_no, now_ms())
                for job_id in ids:
                    book[job_id] = at
                await asyncio.sleep(self.target.push_pause_s)
        except (ConnectionError, OSError):
            pass
        finally:
            conn.abort()

    async def consume(self, addr: tuple[str, int], stop: asyncio.Event, round_no: int) -> None:
        conn = await connect(*addr)
        history = self.history
        pull = {"cmd": "PULL", "queue": QUEUE, "owner": "w", "lockTtl": self.target.lock_ttl_ms, "timeout": 50}
        try:
            while not stop.is_set():
                reply = await self.ask(conn, pull)
                job = reply.get("job")
                if not job:
                    await away(reply)
                    continue
                history.delivered(job)
                if job["id"] not in history.failed and len(history.acked) % 5 == 0:
                    failure = await self.settle(conn, {"cmd": "FAIL", "id": job["id"], "token": reply["token"],
                                                       "error": "crash-load", "stack": FAIL_STACK}, stop)
                    if failure.get("ok"):
                        history.failed[job["id"]] = (round_no, now_ms())
                    continue
                ack = await self.settle(conn, {"cmd": "ACK", "id": job["id"], "token": reply["token"]}, stop)
                if ack.get("ok"):
                    history.completed(job["id"], round_no)
        except (ConnectionError, OSError):
            pass
        finally:
            conn.abort()

    async def produce_flows(self, addr: tuple[str, int], stop: asyncio.Event, round_no: int,
                            rng: random.Random) -> None:
        conn = await connect(*addr)
        try:
            n = 0
            while not stop.is_set():
                parent = f"g{round_no}-{addr[1]}-{n}"
                kids = [f"{parent}-{i}" for i in range(rng.randint(1, 8))]
                n += 1
                # Recorded before sending: a graph whose reply never came must still be all or nothing.
                self.history.graphs[parent] = kids
                reply = await self.ask(conn, flow_graph(parent, kids))
                if reply.get("ok"):
                    self.history.graphs_acked.add(parent)
                await away(reply)
        except (ConnectionError, OSError):
            pass
        finally:
            conn.abort()

    async def consume_flows(self, addr: tuple[str, int], stop: asyncio.Event) -> None:
        conn = await connect(*addr)
        try:
            while not stop.is_set():
                reply = await self.ask(conn, {"cmd": "PULLB", "queue": FLOW_CHILDREN, "count": 8, "timeout": 50})
                jobs = reply.get("jobs") or []
                if not jobs:
                    await away(reply)
                    continue
                parents = await self.ask_all(conn, [{"cmd": "GetState", "id": job["parentId"]} for job in jobs])
                self.history.orphan_pulls += [
                    job["id"] for job, r in zip(jobs, parents) if r.get("state") == "unknown"]
                await self.settle(conn, {"cmd": "ACKB", "ids": [job["id"] for job in jobs]}, stop)
        except (ConnectionError, OSError):
            pass
        finally:
            conn.abort()

    async def consume_cron(self, addr: tuple[str, int], stop: asyncio.Event, round_no: int) -> None:
        conn = await connect(*addr)
        history = self.history
        try:
            while not stop.is_set():
                reply = await self.ask(conn, {"cmd": "PULL", "queue": CRON, "owner": "c", "timeout": 50})
                job = reply.get("job")
                if not job:
                    await away(reply)
                    continue
                history.delivered(job)
                ack = await self.settle(conn, {"cmd": "ACK", "id": job["id"], "token": reply["token"]}, stop)
                if ack.get("ok"):
                    history.completed(job["id"], round_no)
                    history.cron_completed += 1
        except (ConnectionError, OSError):
            pass
        finally:
            conn.abort()


async def away(reply: dict[str, Any]) -> bool:
    """Whether ``reply`` says the store is away; if so, after a pause before the client tries again."""
    if reply.get("ok") or not str(reply.get("error", "")).startswith(UNAVAILABLE):
        return False
    await asyncio.sleep(0.05)
    return True


def flow_graph(parent: str, kids: list[str]) -> dict[str, object]:
    jobs: list[dict[str, object]] = [{"id": parent, "queue": FLOW_PARENTS, "input": {
        "name": "p", "data": {"__childrenIds": kids}, "childrenIds": kids, "dependsOn": kids}}]
    jobs += [{"id": kid, "queue": FLOW_CHILDREN, "input": {
        "name": "k", "data": {"__parentId": parent, "__parentQueue": FLOW_PARENTS}, "parentId": parent}}
        for kid in kids]
    return {"cmd": "PUSHF", "jobs": jobs}


async def one_round(target: Target, load: Load, rng: random.Random, seconds: tuple[float, float],
                    last: bool) -> None:
    """The load for a random time within ``seconds``, a kill, then the target recovered (``last``: for the
    drain, not to be killed)."""
    stop = asyncio.Event()
    history = load.history
    round_no = len(history.kills)
    addrs = target.addrs
    if round_no == 0:
        conn = await connect(*addrs[0])
        reply = await conn.request({"cmd": "Cron", "name": CRON, "queue": CRON, "repeatEvery": CRON_EVERY_MS,
                                    "data": {}})
        assert reply.get("ok"), reply
        await conn.close()
    workers = [lambda a: load.produce(a, stop, round_no)] * 2 + [lambda a: load.consume(a, stop, round_no)] * 3
    workers += [lambda a: load.produce_flows(a, stop, round_no, rng), lambda a: load.consume_flows(a, stop),
                lambda a: load.consume_cron(a, stop, round_no)]
    # Each kind of client on every server, when there are several.
    tasks = [asyncio.create_task(work(addr)) for work in workers for addr in addrs]
    await asyncio.sleep(rng.uniform(*seconds))
    await target.kill(round_no)
    history.kills.append(now_ms())
    await target.outage(rng)
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    await target.recover(to_be_killed=not last)


async def drain(target: Target, history: History) -> tuple[set[str], list[str]]:
    """Pull everything left, waiting for leases the kills left behind to lapse; returns the ids of pushes
    still known to the server (any state) and of acknowledged pushes known but not completed."""
    conn = await connect(*target.addrs[0])
    deadline = time.monotonic() + target.lock_ttl_ms / 1000 + 30
    try:
        idle = 0
        while idle < 3 or (await _unsettled(conn) and time.monotonic() < deadline):
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
        unworked: list[str] = []
        pushed = list(history.durable) + list(history.buffered)
        for i in range(0, len(pushed), 500):
            replies = await conn.pipeline([{"cmd": "GetState", "id": j} for j in pushed[i : i + 500]])
            for job_id, r in zip(pushed[i : i + 500], replies):
                if r["state"] != "unknown":
                    known.add(job_id)
                    if r["state"] != "completed":
                        unworked.append(job_id)
        return known, unworked
    finally:
        await conn.close()


async def _unsettled(conn: Connection) -> int:
    """The queue's jobs not finished yet: waiting, delayed or leased."""
    counts = (await conn.request({"cmd": "GetJobCounts", "queue": QUEUE}))["counts"]
    return sum(counts[state] for state in ("waiting", "prioritized", "delayed", "active", "paused"))


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
    # Acknowledged pushes still there after the drain but not completed.
    unworked: int = 0
    single_pushes: int = 0
    slowest_reply_s: float = 0.0
    hangs: int = 0
    unavailable_replies: int = 0
    # Of the kills, how many took PostgreSQL down, and the longest a broker took to serve again after it.
    postgres_kills: int = 0
    slowest_reconnect_s: float = 0.0
    # Whether the cron is still registered after the last kill.
    cron_alive: bool = False
    flows: FlowVerdict | None = None

    @property
    def passed(self) -> bool:
        flows = self.flows
        return (self.durable_missing == 0 and self.redelivered_after_ack == 0 and self.unworked == 0
                and self.buffered_missing_outside_window == 0 and self.integrity == "ok"
                and self.double_completed == 0 and self.failures_lost == 0 and self.cron_alive
                and self.hangs == 0
                and flows is not None and flows.partial == flows.acked_missing == flows.stuck_parents == 0
                and flows.orphan_pulls == 0)


def check(history: History, known: set[str], unworked: list[str], target: Target, integrity: str) -> Verdict:
    durable_missing = [j for j in history.durable if j not in known]
    buffered_missing = [j for j in history.buffered if j not in known]
    window = target.buffer_loss_window_ms
    worst = 0.0
    outside = 0
    for job_id in buffered_missing:
        round_no, at = history.buffered[job_id]
        gap = max(0.0, history.kills[round_no] - at) if round_no < len(history.kills) else float("inf")
        worst = max(worst, gap)
        if window is None or gap > window:
            outside += 1
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
        unworked=len(unworked),
        single_pushes=history.single_pushes,
        slowest_reply_s=round(history.slowest_reply_s, 3),
        hangs=history.hangs,
        unavailable_replies=history.unavailable,
    )


async def run_on(target: Target, kills: int, seed: int = 1, progress: bool = False,
                 history: History | None = None, round_seconds: tuple[float, float] = ROUND_SECONDS) -> Verdict:
    """``kills`` rounds of load against ``target``, each killing it after a random time within
    ``round_seconds``, then the drain and the checks (into ``history`` when given); stops the target."""
    rng = random.Random(seed)
    history = History() if history is None else history
    load = Load(target, history)
    await target.start(to_be_killed=kills > 0)
    try:
        for i in range(kills):
            await one_round(target, load, rng, round_seconds, last=i == kills - 1)
            if progress:
                print(f"kill {i + 1}/{kills} ({target.last_kill}): {len(history.durable) + len(history.buffered)}"
                      f" pushed, {len(history.acked)} acked", file=sys.stderr)
        known, unworked = await drain(target, history)
        history.known = known
        flows = await check_flows(target.addrs[0], history)
        conn = await connect(*target.addrs[0])
        cron = await conn.request({"cmd": "CronGet", "name": CRON})
        await conn.close()
        integrity = await target.integrity()
    finally:
        await target.stop()
    verdict = check(history, known, unworked, target, integrity)
    verdict.flows = flows
    verdict.cron_alive = bool(cron.get("ok") and cron.get("cron"))
    verdict.postgres_kills = target.postgres_kills
    verdict.slowest_reconnect_s = round(target.slowest_reconnect_s, 3)
    return verdict


async def run(kills: int, workdir: Path, seed: int = 1, progress: bool = False,
              killed_env: Mapping[str, str] | None = None,
              after_kill: Callable[[History], None] | None = None, history: History | None = None,
              round_seconds: tuple[float, float] = ROUND_SECONDS) -> Verdict:
    """The SQLite run: one server on a file in ``workdir``. ``killed_env`` is added to the environment of
    the servers that are killed; ``after_kill`` runs after each kill, before the next start (the power-loss
    test drops unsynced writes there)."""
    history = History() if history is None else history
    hook = after_kill
    target = SqliteTarget(workdir, killed_env, None if hook is None else lambda: hook(history))
    return await run_on(target, kills, seed, progress, history, round_seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--postgres", action="store_true",
                        help="two PostgreSQL-mode brokers; kills alternate between a broker and PostgreSQL")
    parser.add_argument("--dir", default=None, help="work folder (default: a temporary one)")
    args = parser.parse_args()
    import tempfile

    started = time.monotonic()
    if args.postgres:
        target: Target = PostgresTarget.on_new_server()
    else:
        target = SqliteTarget(Path(args.dir or tempfile.mkdtemp(prefix="bunqueue-crash-")))
    verdict = asyncio.run(run_on(target, args.kills, args.seed, progress=True))
    for key, value in vars(verdict).items():
        print(f"{key:34} {value}")
    print(f"{'seconds':34} {time.monotonic() - started:.0f}")
    print("PASS" if verdict.passed else "FAIL")
    sys.exit(0 if verdict.passed else 1)


if __name__ == "__main__":
    main()

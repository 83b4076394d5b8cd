"""The crash load's clients (``Load``): producers of PUSH, PUSHB and PUSHF, consumers of the jobs, the flow
children, their parents and the cron's jobs, each writing what was acknowledged to the ``History``.

Producers wait while their queue's backlog (``Count``) is above BACKLOG_MAX, so the consumers keep up and
the store (and each restart) stays small over hundreds of kills; in PostgreSQL mode they also pause between
pushes (``Target.push_pause_s``). Every request is timed against the target's reply limit; a reply saying
the store is away acknowledges nothing, and an ACK or FAIL refused so is sent again.
"""
from __future__ import annotations

import asyncio
import random
import time
from typing import Any

from bunqueue.client import Connection, connect
from tests.reliability.crashhistory import FAIL_STACK, History
from tests.reliability.crashtargets import QUEUE, Target, now_ms

# PUSHF graphs: a parent in FLOW_PARENTS waits for its children in FLOW_CHILDREN.
FLOW_PARENTS = "crash-fp"
FLOW_CHILDREN = "crash-fc"
# A cron that fires every CRON_EVERY_MS into its own queue.
CRON = "crash-cron"
CRON_EVERY_MS = 100
# The errors.storage_unavailable prefix: the command had no acknowledged effect.
UNAVAILABLE = "Storage unavailable"
# What a client waits after such a reply before it asks again.
AWAY_PAUSE_S = 0.05
# A producer pushes only while its queue holds at most this many jobs not yet pulled (Count).
BACKLOG_MAX = 200
BACKLOG_POLL_S = 0.005
# Every FAIL_EVERY-th pull of a consumer is failed (once per job) instead of acknowledged.
FAIL_EVERY = 5
# A PUSHB carries this many jobs.
BATCH = 5


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
        history.unavailable += sum(map(unavailable, replies))
        return replies

    async def settle(self, conn: Connection, frame: dict[str, Any], stop: asyncio.Event) -> dict[str, Any]:
        """An ACK or FAIL, sent again while the store is away: its lease is still the worker's."""
        reply = await self.ask(conn, frame)
        while await away(reply) and not stop.is_set():
            reply = await self.ask(conn, frame)
        return reply

    async def wait_for_room(self, conn: Connection, queue: str, stop: asyncio.Event) -> None:
        """Return once ``queue`` holds at most BACKLOG_MAX jobs not yet pulled, the round is over, or the
        store is away (the push that follows then says so)."""
        while not stop.is_set():
            reply = await self.ask(conn, {"cmd": "Count", "queue": queue})
            if not reply.get("ok") or reply["count"] <= BACKLOG_MAX:
                return
            await asyncio.sleep(BACKLOG_POLL_S)

    async def produce(self, addr: tuple[str, int], stop: asyncio.Event, round_no: int, kind: str) -> None:
        """Pushes with ``kind`` (PUSH: one job a request, PUSHB: BATCH), durable, buffered and delayed."""
        conn = await connect(*addr)
        history = self.history
        try:
            n = 0
            while not stop.is_set():
                await self.wait_for_room(conn, QUEUE, stop)
                if kind == "PUSH":
                    # Every other job durable, every other durable one delayed.
                    durable, delayed = n % 2 == 0, n % 4 == 0
                    reply = await self.ask(conn, {"cmd": "PUSH", "queue": QUEUE, **job_fields(n, durable, delayed)})
                    ids = [reply["id"]] if reply.get("ok") else []
                    n += 1
                else:
                    # Every tenth batch durable, every other durable batch delayed.
                    durable, delayed = n % 10 == 0, n % 20 == 0
                    batch = [job_fields(n + i, durable, delayed) for i in range(BATCH)]
                    reply = await self.ask(conn, {"cmd": "PUSHB", "queue": QUEUE, "jobs": batch})
                    ids = reply["ids"] if reply.get("ok") else []
                    n += BATCH
                history.pushed(ids, durable, kind, delayed, round_no)
                await away(reply)
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
            pulls = 0
            while not stop.is_set():
                reply = await self.ask(conn, pull)
                job = reply.get("job")
                if not job:
                    await away(reply)
                    continue
                pulls += 1
                history.delivered(job)
                if job["id"] not in history.failed and pulls % FAIL_EVERY == 0:
                    failure = await self.settle(conn, {"cmd": "FAIL", "id": job["id"], "token": reply["token"],
                                                       "error": "crash-load", "stack": FAIL_STACK}, stop)
                    # A FAIL that came after its lease lapsed (the database away past lockTtl) is answered as
                    # already finalized, not applied: the lapse counted the attempt, and no stack was kept.
                    if failure.get("ok") and failure.get("data", {}).get("applied", True):
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
        history = self.history
        try:
            n = 0
            while not stop.is_set():
                # Parents released by their children wait in their own queue: both backlogs are bounded.
                await self.wait_for_room(conn, FLOW_CHILDREN, stop)
                await self.wait_for_room(conn, FLOW_PARENTS, stop)
                parent = f"g{round_no}-{addr[1]}-{n}"
                kids = [f"{parent}-{i}" for i in range(rng.randint(1, 8))]
                n += 1
                # Recorded before sending: a graph whose reply never came must still be all or nothing.
                history.graphs[parent] = kids
                reply = await self.ask(conn, flow_graph(parent, kids))
                if reply.get("ok"):
                    history.graphs_acked.add(parent)
                    history.pushed_by["PUSHF"] += 1 + len(kids)
                await away(reply)
        except (ConnectionError, OSError):
            pass
        finally:
            conn.abort()

    async def consume_flows(self, addr: tuple[str, int], stop: asyncio.Event, round_no: int) -> None:
        """Pull children, check that their parents are known, and acknowledge them."""
        conn = await connect(*addr)
        history = self.history
        try:
            while not stop.is_set():
                reply = await self.ask(conn, {"cmd": "PULLB", "queue": FLOW_CHILDREN, "count": 8, "timeout": 50})
                jobs = reply.get("jobs") or []
                if not jobs:
                    await away(reply)
                    continue
                parents = await self.ask_all(conn, [{"cmd": "GetState", "id": job["parentId"]} for job in jobs])
                history.orphan_pulls += [job["id"] for job, r in zip(jobs, parents) if r.get("state") == "unknown"]
                for job in jobs:
                    history.delivered(job)
                ids = [job["id"] for job in jobs]
                ack = await self.settle(conn, {"cmd": "ACKB", "ids": ids}, stop)
                if ack.get("ok"):
                    for job_id in ids:
                        history.completed(job_id, round_no)
        except (ConnectionError, OSError):
            pass
        finally:
            conn.abort()

    async def consume_parents(self, addr: tuple[str, int], stop: asyncio.Event, round_no: int) -> None:
        """Pull the parents whose children all completed, check that they did, and acknowledge them."""
        conn = await connect(*addr)
        history = self.history
        pull = {"cmd": "PULL", "queue": FLOW_PARENTS, "owner": "p", "lockTtl": self.target.lock_ttl_ms,
                "timeout": 50}
        try:
            while not stop.is_set():
                reply = await self.ask(conn, pull)
                job = reply.get("job")
                if not job:
                    await away(reply)
                    continue
                history.delivered(job)
                kids = history.graphs.get(job["id"], [])
                states = await self.ask_all(conn, [{"cmd": "GetState", "id": kid} for kid in kids])
                # A state the store was away for says nothing: asked again, or (the round over) not judged.
                while any(map(unavailable, states)) and not stop.is_set():
                    await asyncio.sleep(AWAY_PAUSE_S)
                    states = await self.ask_all(conn, [{"cmd": "GetState", "id": kid} for kid in kids])
                if not any(map(unavailable, states)) and any(r.get("state") != "completed" for r in states):
                    history.early_parents.append(job["id"])
                ack = await self.settle(conn, {"cmd": "ACK", "id": job["id"], "token": reply["token"]}, stop)
                if ack.get("ok"):
                    history.completed(job["id"], round_no)
                    history.parents_completed += 1
        except (ConnectionError, OSError):
            pass
        finally:
            conn.abort()

    async def consume_cron(self, addr: tuple[str, int], stop: asyncio.Event, round_no: int) -> None:
        conn = await connect(*addr)
        history = self.history
        try:
            while not stop.is_set():
                # The target's lockTtl, as the other consumers: a cron job whose ACK a kill swallowed comes
                # back within the run, and until it does, the cron (preventOverlap) spawns no other.
                reply = await self.ask(conn, {"cmd": "PULL", "queue": CRON, "owner": "c", "timeout": 50,
                                              "lockTtl": self.target.lock_ttl_ms})
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


def unavailable(reply: dict[str, Any]) -> bool:
    """Whether ``reply`` says the store is away."""
    return not reply.get("ok") and str(reply.get("error", "")).startswith(UNAVAILABLE)


async def away(reply: dict[str, Any]) -> bool:
    """Whether ``reply`` says the store is away; if so, after a pause before the client tries again."""
    if not unavailable(reply):
        return False
    await asyncio.sleep(AWAY_PAUSE_S)
    return True


def job_fields(n: int, durable: bool, delayed: bool) -> dict[str, Any]:
    # Delayed jobs must survive the kill in the delayed set; 1000 attempts without backoff retry a FAIL at once.
    return {"name": "j", "data": {"n": n}, "durable": durable, "maxAttempts": 1000, "backoff": 0,
            **({"delay": 50} if delayed else {})}


def flow_graph(parent: str, kids: list[str]) -> dict[str, object]:
    jobs: list[dict[str, object]] = [{"id": parent, "queue": FLOW_PARENTS, "input": {
        "name": "p", "data": {"__childrenIds": kids}, "childrenIds": kids, "dependsOn": kids}}]
    jobs += [{"id": kid, "queue": FLOW_CHILDREN, "input": {
        "name": "k", "data": {"__parentId": parent, "__parentQueue": FLOW_PARENTS}, "parentId": parent}}
        for kid in kids]
    return {"cmd": "PUSHF", "jobs": jobs}

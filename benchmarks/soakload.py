"""The soak's load: a paced producer, long-polling workers and the tally of every job's completions.

Jobs carry a sequence number in their data (``seq``); the tally is a bytearray indexed by it holding each
job's successful acknowledgements (saturating at 255), so an hour at 5,000 jobs/s costs 18 MB here rather
than a set of 18 million id strings.
"""
from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from bunqueue.client import Connection, prepare

Reply = dict[str, Any]

# In-flight PUSHB batches the producer allows before it waits for the oldest reply.
PUSH_WINDOW = 16
# The worker's lease on a pulled job and how long an empty PULLB waits server-side for a push.
LOCK_TTL_MS = 30_000
POLL_TIMEOUT_MS = 1_000


class SoakError(Exception):
    """The server refused a command the soak cannot go on without."""


@dataclass(frozen=True)
class LoadShape:
    """What the producer sends and how the workers pull."""

    queue: str
    rate: float
    total: int
    push_batch: int = 100
    pull_count: int = 10
    data_bytes: int = 64
    durable: bool = False


class Tally:
    """Every job's acknowledgements, by sequence number, and what went wrong on the way."""

    def __init__(self, total: int) -> None:
        self.acks = bytearray(total)
        self.pushed = 0
        self.completed = 0
        self.acks_refused = 0
        self.unknown_seq = 0

    def record_ack(self, jobs: list[Reply], reply: Reply) -> None:
        if reply.get("ok") is not True:
            self.acks_refused += len(jobs)
            return
        ignored = set((reply.get("data") or {}).get("ignoredIndices") or ())
        self.acks_refused += len(ignored)
        acks, total = self.acks, len(self.acks)
        for index, job in enumerate(jobs):
            if index in ignored:
                continue
            seq = job["data"]["seq"]
            if not 0 <= seq < total:
                self.unknown_seq += 1
                continue
            count = acks[seq]
            if count < 255:
                acks[seq] = count + 1
            self.completed += 1

    def completed_twice(self) -> int:
        """Jobs acknowledged more than once among those pushed."""
        pushed = self.acks[: self.pushed]
        return len(pushed) - pushed.count(0) - pushed.count(1)

    def never_completed(self) -> int:
        return self.acks[: self.pushed].count(0)


def _check(reply: Reply, what: str) -> Reply:
    if reply.get("ok") is not True:
        raise SoakError(f"{what} refused: {reply.get('error', reply)!r}")
    return reply


async def produce(conn: Connection, shape: LoadShape, tally: Tally, started: float) -> None:
    """PUSHB ``shape.total`` jobs paced to ``shape.rate``: each batch goes when the clock says it is due.

    A server slower than the rate holds the producer back through the in-flight window; it still pushes
    every job, late, and the rate check says so."""
    payload = "x" * shape.data_bytes
    options: dict[str, Any] = {"removeOnComplete": True}
    if shape.durable:
        options["durable"] = True
    in_flight: deque[asyncio.Future[Reply]] = deque()
    sent = 0
    while sent < shape.total:
        due = min(shape.total, math.ceil((time.monotonic() - started) * shape.rate))
        while sent < due:
            end = min(due, sent + shape.push_batch)
            jobs = [{"name": "soak", "data": {"seq": seq, "payload": payload}, **options} for seq in range(sent, end)]
            in_flight.append(conn.request_nowait({"cmd": "PUSHB", "queue": shape.queue, "jobs": jobs}))
            sent = end
            while len(in_flight) >= PUSH_WINDOW:
                await _settle_push(in_flight.popleft(), tally)
            while in_flight and in_flight[0].done():
                await _settle_push(in_flight.popleft(), tally)
        if sent < shape.total:
            next_due = started + min(sent + shape.push_batch, shape.total) / shape.rate
            await asyncio.sleep(max(0.001, next_due - time.monotonic()))
    while in_flight:
        await _settle_push(in_flight.popleft(), tally)


async def _settle_push(future: asyncio.Future[Reply], tally: Tally) -> None:
    reply = _check(await future, "PUSHB")
    tally.pushed += len(reply["ids"])


async def work(conn: Connection, shape: LoadShape, owner: str, tally: Tally, stop: asyncio.Event) -> None:
    """Pull up to ``pull_count`` jobs under a lease, acknowledge them all with one ACKB sent together with
    the next PULLB, until ``stop`` is set and a pull comes back empty."""
    pullb = prepare(
        {
            "cmd": "PULLB",
            "queue": shape.queue,
            "count": shape.pull_count,
            "owner": owner,
            "lockTtl": LOCK_TTL_MS,
            "timeout": POLL_TIMEOUT_MS,
        }
    )
    reply = _check(await conn.request(pullb), "PULLB")
    while True:
        jobs = reply["jobs"]
        if not jobs:
            if stop.is_set():
                return
            reply = _check(await conn.request(pullb), "PULLB")
            continue
        ack = {"cmd": "ACKB", "ids": [job["id"] for job in jobs], "tokens": reply["tokens"]}
        ack_reply, reply = await conn.pipeline([ack, pullb])
        tally.record_ack(jobs, ack_reply)
        _check(reply, "PULLB")

"""A producer/consumer load against servers killed with SIGKILL at random moments: one SQLite server, or two
PostgreSQL-mode brokers in one namespace whose kills alternate between a broker and PostgreSQL itself.

The load (``crashclients``) mixes PUSH and PUSHB (durable, buffered and delayed jobs), PULL with ACK or FAIL
(a failed job is retried), PUSHF graphs whose children and then parents are pulled and acknowledged, and a
cron whose jobs are pulled and acknowledged; its clients are spread over the servers. Producers wait while
their queue's backlog is above a bound, so consumers keep up and the store (and each restart) stays small
over hundreds of kills; each round lasts a random time, and at least until it pushed and completed a job.
Every acknowledgement the client receives is written to a history (``crashhistory``); an error reply is no
acknowledgement (an ACK or FAIL refused with ``Storage unavailable`` is sent again). After the last restart
the queue is drained and the history checked: no acknowledged push may be missing or left unworked, no job
may be delivered again after its ACK was acknowledged or completed twice, a job whose FAIL was acknowledged
must come back with its failure, buffered pushes may be lost only inside the documented window (in
PostgreSQL mode not at all: a push is answered after its commit), no parent may be pulled before all its
children completed, every reply comes within its limit, and the cron outlives every kill. The targets
(``crashtargets``) say what a kill is and how the store's own consistency is checked.

Run directly for a long run: ``nice python tests/reliability/crashload.py --kills 500 --seed 11`` (SQLite)
or ``nice python tests/reliability/crashload.py --postgres --kills 100``.
"""
from __future__ import annotations

import argparse
import asyncio
import random
import sys
import time
from collections.abc import Callable, Coroutine, Mapping
from pathlib import Path
from typing import Any

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bunqueue.client import Connection, connect
from tests.reliability.crashclients import CRON, CRON_EVERY_MS, Load
from tests.reliability.crashhistory import History, Verdict, check, check_flows
from tests.reliability.crashtargets import BUFFER_LOSS_WINDOW_MS, QUEUE, PostgresTarget, SqliteTarget, Target

__all__ = ["BUFFER_LOSS_WINDOW_MS", "History", "Verdict", "run", "run_on"]

# Each round's load runs a random time in this range (seconds), then at least until it pushed and completed
# a job (at most ROUND_WORK_TIMEOUT_S more): a round killed before that would test only the restart.
ROUND_SECONDS = (0.05, 0.4)
ROUND_WORK_TIMEOUT_S = 10.0


async def one_round(target: Target, load: Load, rng: random.Random, seconds: tuple[float, float],
                    last: bool) -> None:
    """The load for a random time within ``seconds`` and until it did work, a kill, then the target
    recovered (``last``: for the drain, not to be killed)."""
    stop = asyncio.Event()
    history = load.history
    round_no = history.start_round()
    addrs = target.addrs
    if round_no == 0:
        conn = await connect(*addrs[0])
        reply = await conn.request({"cmd": "Cron", "name": CRON, "queue": CRON, "repeatEvery": CRON_EVERY_MS,
                                    "data": {}})
        assert reply.get("ok"), reply
        await conn.close()
    workers: list[Callable[[tuple[str, int]], Coroutine[Any, Any, None]]] = [
        lambda a: load.produce(a, stop, round_no, "PUSHB"), lambda a: load.produce(a, stop, round_no, "PUSH"),
        lambda a: load.produce_flows(a, stop, round_no, rng), lambda a: load.consume_flows(a, stop, round_no),
        lambda a: load.consume_parents(a, stop, round_no), lambda a: load.consume_cron(a, stop, round_no),
    ]
    workers += [lambda a: load.consume(a, stop, round_no)] * 3
    # Each kind of client on every server, when there are several.
    tasks = [asyncio.create_task(work(addr)) for work in workers for addr in addrs]
    await asyncio.sleep(rng.uniform(*seconds))
    deadline = time.monotonic() + ROUND_WORK_TIMEOUT_S
    while 0 in (history.round_pushes[-1], history.round_completions[-1]) and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    await target.kill(round_no)
    history.killed()
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


async def run_on(target: Target, kills: int, seed: int = 1, progress: bool = False,
                 history: History | None = None, round_seconds: tuple[float, float] = ROUND_SECONDS) -> Verdict:
    """``kills`` rounds of load against ``target``, each killing it after a random time within
    ``round_seconds`` (and once it did work), then the drain and the checks (into ``history`` when given);
    stops the target."""
    started = time.monotonic()
    rng = random.Random(seed)
    history = History() if history is None else history
    load = Load(target, history)
    await target.start(to_be_killed=kills > 0)
    try:
        for i in range(kills):
            await one_round(target, load, rng, round_seconds, last=i == kills - 1)
            if progress:
                print(f"kill {i + 1}/{kills} at {time.monotonic() - started:.0f} s ({target.last_kill}):"
                      f" {len(history.durable) + len(history.buffered)} pushed, {len(history.acked)} acked",
                      file=sys.stderr, flush=True)
        known, unworked = await drain(target, history)
        history.known = known
        flows = await check_flows(target.addrs[0], history)
        conn = await connect(*target.addrs[0])
        cron = await conn.request({"cmd": "CronGet", "name": CRON})
        await conn.close()
        integrity = await target.integrity()
        store_mb = await target.store_mb()
    finally:
        await target.stop()
    verdict = check(history, known, unworked, target, integrity)
    verdict.flows = flows
    verdict.cron_alive = bool(cron.get("ok") and cron.get("cron"))
    verdict.postgres_kills = target.postgres_kills
    verdict.slowest_reconnect_s = round(target.slowest_reconnect_s, 3)
    verdict.store_mb = round(store_mb, 1)
    verdict.seconds = round(time.monotonic() - started, 1)
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
    parser.add_argument("--dir", default=None, help="work folder, created if missing (default: a temporary one)")
    args = parser.parse_args()
    import tempfile

    if args.postgres:
        target: Target = PostgresTarget.on_new_server()
    else:
        target = SqliteTarget(Path(args.dir or tempfile.mkdtemp(prefix="bunqueue-crash-")))
    verdict = asyncio.run(run_on(target, args.kills, args.seed, progress=True))
    for key, value in vars(verdict).items():
        print(f"{key:34} {value}")
    print("PASS" if verdict.passed else "FAIL")
    sys.exit(0 if verdict.passed else 1)


if __name__ == "__main__":
    main()

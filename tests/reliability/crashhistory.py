"""What the crash load's client saw (``History``), and the checks made of it after the last restart
(``check``, ``check_flows``) into a ``Verdict``."""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bunqueue.client import connect
from tests.reliability.crashtargets import Target, now_ms

# The stack a FAIL sends: a job delivered after its FAIL was acknowledged must carry it.
FAIL_STACK = ["crash-load"]


@dataclass
class History:
    # Job id -> (round, time the push was acknowledged): a reply already on its way when the server was
    # killed is read after the kill, so losses are measured against the kill of the job's own round.
    durable: dict[str, tuple[int, float]] = field(default_factory=dict)
    buffered: dict[str, tuple[int, float]] = field(default_factory=dict)
    # Acknowledged pushes by command (PUSHF counts the jobs of acknowledged graphs).
    pushed_by: Counter[str] = field(default_factory=Counter)
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
    # Per round: acknowledged pushes and completions so far, and both as they stood at its kill.
    round_pushes: list[int] = field(default_factory=list)
    round_completions: list[int] = field(default_factory=list)
    work_at_kill: list[tuple[int, int]] = field(default_factory=list)
    # Parent id -> its children's ids, for every PUSHF sent; the acknowledged ones by parent id.
    graphs: dict[str, list[str]] = field(default_factory=dict)
    graphs_acked: set[str] = field(default_factory=set)
    # Children pulled while the server did not know their parent: a graph visible in part.
    orphan_pulls: list[str] = field(default_factory=list)
    # Parents pulled while one of their children was not completed.
    early_parents: list[str] = field(default_factory=list)
    parents_completed: int = 0
    # Replies: the slowest, those not there within the target's limit, and those saying the store was away.
    slowest_reply_s: float = 0.0
    hangs: int = 0
    unavailable: int = 0
    # The pushed jobs the server still knew after the last restart and the drain.
    known: set[str] = field(default_factory=set)

    def start_round(self) -> int:
        self.round_pushes.append(0)
        self.round_completions.append(0)
        return len(self.kills)

    def pushed(self, ids: list[str], durable: bool, kind: str, delayed: bool, round_no: int) -> None:
        book = self.durable if durable else self.buffered
        at = (round_no, now_ms())
        for job_id in ids:
            book[job_id] = at
        self.pushed_by[kind] += len(ids)
        self.delayed += len(ids) if delayed else 0
        self.count_round(self.round_pushes, round_no, len(ids))

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
        self.count_round(self.round_completions, round_no, 1)

    def killed(self) -> None:
        self.kills.append(now_ms())
        self.work_at_kill.append((self.round_pushes[-1], self.round_completions[-1]))

    @staticmethod
    def count_round(counts: list[int], round_no: int, n: int) -> None:
        # The drain's round (after the last kill) has no count.
        if round_no < len(counts):
            counts[round_no] += n

    def failures_lost(self) -> list[str]:
        """Jobs whose FAIL was acknowledged but whose latest delivery does not show it."""
        return [job_id for job_id in self.failed if not self.failure_seen.get(job_id, False)]


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
    # Jobs whose FAIL was acknowledged and later delivered without its failure (or never again).
    failures_lost: int
    cron_completed: int
    # The fewest acknowledged pushes and completions of any round before its kill.
    fewest_round_pushes: int
    fewest_round_completions: int
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
    # The store's size after the run (the SQLite file; in PostgreSQL mode the namespace's job rows).
    store_mb: float = 0.0
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        flows = self.flows
        return (self.durable_missing == 0 and self.redelivered_after_ack == 0 and self.unworked == 0
                and self.buffered_missing_outside_window == 0 and self.integrity == "ok"
                and self.double_completed == 0 and self.failures_lost == 0 and self.cron_alive
                and self.hangs == 0
                and flows is not None and flows.partial == flows.acked_missing == flows.stuck_parents == 0
                and flows.orphan_pulls == flows.early_parents == 0)


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
        pushed_by=dict(history.pushed_by),
        acked=len(history.acked),
        durable_missing=len(durable_missing),
        redelivered_after_ack=len(history.redelivered_after_ack),
        buffered_missing=len(buffered_missing),
        buffered_missing_outside_window=outside,
        worst_buffered_loss_ms=round(worst, 1),
        integrity=integrity,
        failed=len(history.failed),
        failed_then_completed=len(history.failed.keys() & history.acked),
        delayed_pushed=history.delayed,
        double_completed=sum(n > 1 for n in history.completions.values()),
        failures_lost=len(history.failures_lost()),
        cron_completed=history.cron_completed,
        fewest_round_pushes=min((pushes for pushes, _ in history.work_at_kill), default=0),
        fewest_round_completions=min((completions for _, completions in history.work_at_kill), default=0),
        unworked=len(unworked),
        single_pushes=history.pushed_by["PUSH"],
        slowest_reply_s=round(history.slowest_reply_s, 3),
        hangs=history.hangs,
        unavailable_replies=history.unavailable,
    )

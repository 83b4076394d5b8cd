"""Rebuild the broker from what a durable store read at start-up."""
from __future__ import annotations

from typing import Any

from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.timers.retention import completed_time
from bunqueue.broker.transitions import INTERRUPTED
from bunqueue.broker.wiring import Wiring
from bunqueue.storage.schema import Snapshot
from bunqueue.webhooks.registry import Webhook


def restore(broker: Wiring, snap: Snapshot) -> dict[str, int]:
    """Put every job back where it belongs; an interrupted attempt is lost like a stall.

    Returns how many jobs went where, for the start-up log line.
    """
    now = broker.clock()
    t = broker.transitions
    counts = {"queued": 0, "active": 0, "waiting-children": 0, "completed": 0, "failed": 0}
    jobs = sorted(snap.jobs, key=lambda job: job.seq)
    for job in jobs:
        broker.jobs[job.id] = job
    failed: dict[str, Job] = {}
    for job in jobs:
        q = broker.queue(job.queue)
        if job.state == states.ACTIVE:
            started = snap.pulls.get(job.id)
            if started is not None:
                _replay_pull(job, started)
            t.lose_attempt(job, INTERRUPTED, now)
            counts["active"] += 1
        elif job.state == states.READY or job.state == states.DELAYED:
            t.enqueue(q, job, now)
            counts["queued"] += 1
        elif job.state == states.WAITING_CHILDREN:
            job.pending_deps = set(job.pending_deps or job.depends_on)
            if not t.wait_for_dependencies(q, job):
                t.requeue(q, job, job.run_at, now)
            counts["waiting-children"] += 1
        elif job.state == states.COMPLETED:
            broker.records.completed[job.id] = None
            q.completed[job.id] = None
            broker.retention.completed(job.id, completed_time(job))
            counts["completed"] += 1
        elif job.state == states.FAILED:
            failed[job.id] = job
            counts["failed"] += 1
        # (An interrupted cron job was dropped, not requeued: it holds no key.)
        if job.unique_key is not None and job.state in states.LIVE and job.id in broker.jobs:
            broker.keys.take(job, now)
    for queue, settings in snap.queues.items():
        broker.queue(queue).apply_settings(settings, now)
    for queue, group_id, controls in snap.groups:
        broker.groups.restore(queue, group_id, controls)
    for queue, count in snap.completed_counts.items():
        broker.queue(queue).n_completed = count
    broker.records.results.update(snap.results)
    _restore_dlq(broker, snap.dlq, failed)
    children = [job for job in failed.values() if job.parent_id is not None]
    if children:
        kept = {job.id: entry["error"] for job in children if (entry := broker.dlq.get(job.id)) is not None}
        broker.flows.restore(children, kept)
    for record in snap.webhooks:
        broker.events.webhooks.add(Webhook.from_record(record))
    broker.events.refresh()
    if jobs:
        broker.factory.resume_after(max(job.seq for job in jobs))
    broker.crons.load(snap.crons)
    for job_id, queue, completed_at in snap.completed_on_disk:
        broker.retention.restored_on_disk(job_id, queue, completed_at)
    return counts


def _replay_pull(job: Job, started: float) -> None:
    """What the pull did that its record missed (only the state and start time reached the file): the
    attempt's start and its timeline entry."""
    job.started_at = started
    job.note({"state": states.ACTIVE_NAME, "timestamp": started})


def _restore_dlq(broker: Wiring, rows: list[tuple[str, dict[str, Any]]], failed: dict[str, Job]) -> None:
    for queue, entry in sorted(rows, key=lambda row: row[1]["enteredAt"]):
        job = failed.get(entry["job"])
        if job is None:
            continue
        entry["job"] = job
        broker.dlq.restore(queue, entry)

"""What the job family tells of the transitions it committed: this broker's counters and the job events.

``PostgresJobs`` calls one method per transition once its statement committed; the events carry the memory
engine's fields (``EventHub.emit``, ``completed``, ``failed``) and go out through ``publish`` (the engine's
``EventsFamily.publish``: this broker's listeners at once, every other broker's through NOTIFY). The system
events of these transitions (dlq:added, batch:pushed, ...) go to ``hub``'s notices, which send them on to the
other brokers' streams (``EventsFamily.send_system_event``); queue:created stays with this broker's streams.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bunqueue._core.jobs import NO_DATA, Job
from bunqueue.broker import states
from bunqueue.broker.clock import now_ms
from bunqueue.broker.components import eventhub, eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.monitoring.counters import Counters
from bunqueue.storage.postgres.attempts import Stall
from bunqueue.storage.schema import unpack

# publish(queue, event type, job id, **fields)
Publish = Callable[..., None]
# publish_many(queue, event type, job ids): the event of each job, with no other field
PublishMany = Callable[[str, str, list[str]], None]


class JobEvents:
    """``hub``'s streams hear queue:created at the first push this broker sees into a queue it does not know
    (the engine seeds ``queues`` with the namespace's queues at start), as the memory engine tells of a queue
    it creates."""

    __slots__ = ("clock", "counters", "hub", "publish", "publish_many", "queues")

    def __init__(
        self, counters: Counters, publish: Publish, publish_many: PublishMany, clock: Callable[[], float] = now_ms,
        hub: EventHub | None = None,
    ) -> None:
        self.counters = counters
        self.publish = publish
        self.publish_many = publish_many
        self.clock = clock
        self.hub = hub
        self.queues: set[str] = set()

    def pushed(self, jobs: list[Job], ids: list[str]) -> None:
        """A push's answer: a job that took its own id was admitted; another id is the live job that holds
        its unique key, as a deduplicated push is told in memory."""
        if jobs[0].queue not in self.queues:
            self.queues.add(jobs[0].queue)
            if self.hub is not None:
                self.hub.queue_created(jobs[0].queue)
        if len(jobs) > 1 and all(job_id == job.id for job, job_id in zip(jobs, ids)):
            inserted = len(jobs)
            self.counters.on_pushed(jobs[0].queue, inserted)
            self.publish_many(jobs[0].queue, eventhub.PUSHED, ids)
        else:
            inserted = 0
            for job, job_id in zip(jobs, ids):
                if job_id == job.id:
                    inserted += 1
                    self.counters.on_pushed(job.queue)
                    self.publish(job.queue, eventhub.PUSHED, job_id)
                else:
                    self.counters.on_event(job.queue)
                    self.publish(job.queue, eventhub.DUPLICATED, job_id)
        if inserted and len(jobs) > 1 and self.hub is not None and self.hub.notices:
            self.hub.notify(eventnames.BATCH_PUSHED, {
                "queue": jobs[0].queue, "total": len(jobs), "inserted": inserted, "duplicates": len(jobs) - inserted})

    def pulled(self, queue: str, jobs: list[Job]) -> None:
        if jobs:
            self.counters.on_pulled(queue, len(jobs))
            for job in jobs:
                self.publish(queue, eventhub.PULLED, job.id)
            if len(jobs) > 1 and self.hub is not None and self.hub.notices:
                self.hub.notify(eventnames.BATCH_PULLED, {"queue": queue, "count": len(jobs)})

    def completed(self, queue: str, job_id: str, result: Any, has_result: bool) -> None:
        self.counters.on_completed(queue, self.clock())
        if has_result:
            self.publish(queue, eventhub.COMPLETED, job_id, data=result)
        else:
            self.publish(queue, eventhub.COMPLETED, job_id)

    def failed(self, queue: str, job_id: str, record: bytes, error: Any, state: int) -> None:
        """A failed attempt (``record`` the job's and ``state`` its state, as the FAIL left it); a retryable
        one is followed by ``retried``, as in memory, and one filed in the DLQ by dlq:added before it."""
        terminal = state != states.READY and state != states.DELAYED
        self.counters.on_failed(queue, self.clock(), terminal)
        if state == states.FAILED:
            # A FAIL files a job only when its attempts ran out or it was unrecoverable: one reason for both.
            self.dead_lettered(queue, job_id, "max_attempts_exceeded")
        fields: dict[str, Any] = {}
        data = Job.from_record(unpack(record)).data
        if data is not NO_DATA:
            fields["data"] = data
        if error is not None:
            fields["error"] = error
        fields["terminal"] = terminal
        self.publish(queue, eventhub.FAILED, job_id, **fields)
        if not terminal:
            self.publish(queue, eventhub.RETRIED, job_id, prev=eventhub.FAILED)

    def stalled(self, stalls: list[Stall]) -> None:
        """Lapsed leases, with what became of each job, as the memory engine says it (``EventHub.stalled``)."""
        for queue, job_id, stall_count, to_dlq, filed in stalls:
            self.counters.on_event(queue)
            action = "move_to_dlq" if to_dlq else "retry"
            self.publish(queue, eventhub.STALLED, job_id, data={"stallCount": stall_count, "action": action})
            if filed is not None:
                self.dead_lettered(queue, job_id, filed)

    def dependencies_resolved(self, ids: list[str], queues: list[str]) -> bool:
        """Jobs whose last dependency a completion released, told as the memory engine tells them; whether
        anyone listens (then the flows those completions finished are to be told too)."""
        hub = self.hub
        if hub is None or not hub.notices:
            return False
        for job_id, queue in zip(ids, queues):
            hub.notify(eventnames.JOB_DEPENDENCIES_RESOLVED, {"jobId": job_id, "queue": queue})
        return True

    def flows_completed(self, parents: list[tuple[str, str, bytes]]) -> None:
        """flow:completed for each released job whose children have all completed ((id, queue, record) rows);
        a job that waited on dependencies but has no children is no flow parent."""
        if self.hub is None:
            return
        for parent_id, queue, record in parents:
            children = Job.from_record(unpack(record)).children_ids
            if children:
                self.hub.notify(eventnames.FLOW_COMPLETED,
                                {"parentJobId": parent_id, "queue": queue, "childrenCount": len(children)})

    def dead_lettered(self, queue: str, job_id: str, reason: str) -> None:
        if self.hub is not None and self.hub.notices:
            self.hub.notify(eventnames.DLQ_ADDED, {"queue": queue, "jobId": job_id, "reason": reason})

"""Job records: every job the broker holds, with what hangs off it (result, failure history, logs), the
completed jobs kept in memory, and the proofs of completions whose record is gone."""
from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from bunqueue._core.jobs import Job
from bunqueue.broker import states
from bunqueue.broker.components.queues import Queues
from bunqueue.storage import Store

# WaitJob futures per job id (see broker.jobwait).
Waiters = dict[str, list[Any]]


def settle_waiters(waiters: Waiters, job_id: str, completed: bool) -> None:
    futures = waiters.pop(job_id, None)
    if futures:
        for fut in futures:
            if not fut.done():
                fut.set_result(completed)


class JobRecords:
    # Slots: read by the compiled completion for every acknowledged job.
    __slots__ = (
        "child_results", "completed", "completion_proofs", "evicted_to_disk", "failures", "generations", "jobs",
        "logs", "max_completed_jobs", "queues", "results", "store", "waiters",
    )

    def __init__(
        self, store: Store, queues: Queues, max_completed_jobs: int, generations: dict[str, Any]
    ) -> None:
        self.store = store
        self.queues = queues
        self.jobs: dict[str, Job] = {}
        self.results: dict[str, Any] = {}
        # Results of children gone from memory while their parent waits, by parent id, then child id:
        # GetChildrenValues still answers them (under the bare child id) until the parent completes,
        # fails for good or goes, as the reference's dependency results do. Not persisted (nor there).
        self.child_results: dict[str, dict[str, Any]] = {}
        # Failure history per job (the DLQ entry's ``attempts``).
        self.failures: dict[str, list[dict[str, Any]]] = {}
        # Job logs (AddLog), per job id, least recently written first.
        self.logs: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
        self.max_completed_jobs = max(1, max_completed_jobs)
        # Completed jobs in completion order, for FIFO eviction of the in-memory copies.
        self.completed: OrderedDict[str, None] = OrderedDict()
        # Ids known to have completed though their record is gone (removeOnComplete, eviction): they still
        # satisfy a dependsOn.
        self.completion_proofs: OrderedDict[str, None] = OrderedDict()
        # WaitJob futures per job id: settled True when the job completes, False when it is removed.
        self.waiters: Waiters = {}
        # The DLQ's auto-retry generations (``DeadLetters.generations``): they go with the record.
        self.generations = generations
        # Told (job id, queue) of a completed job whose memory copy is evicted while the store keeps its row.
        self.evicted_to_disk: Callable[[str, str], None] = _ignore_eviction

    def delete(self, job: Job) -> None:
        self.drop_from_memory(job)
        self.store.job_removed(job.id)

    def drop_from_memory(self, job: Job) -> None:
        job_id = job.id
        self.jobs.pop(job_id, None)
        results = self.results
        if job_id in results:
            result = results.pop(job_id)
            if job.parent_id is not None:
                self.keep_for_parent(job, result)
        if self.child_results:
            self.child_results.pop(job_id, None)
        self.failures.pop(job_id, None)
        self.logs.pop(job_id, None)
        self.generations.pop(job_id, None)
        if self.waiters:
            settle_waiters(self.waiters, job_id, False)

    def keep_for_parent(self, child: Job, result: Any) -> None:
        """``child`` leaves memory with ``result``: kept while its parent still waits to run or runs."""
        parent = self.jobs.get(child.parent_id) if child.parent_id is not None else None
        if parent is not None and parent.state in states.LIVE:
            self.child_results.setdefault(parent.id, {})[child.id] = result

    def add_proof(self, job_id: str) -> None:
        proofs = self.completion_proofs
        proofs[job_id] = None
        if len(proofs) > self.max_completed_jobs:
            proofs.popitem(last=False)

    def evict_completed(self) -> None:
        """Forget the oldest tenth of the completed jobs kept in memory."""
        for _ in range(max(1, self.max_completed_jobs // 10)):
            if not self.completed:
                break
            job_id, _ = self.completed.popitem(last=False)
            job = self.jobs.get(job_id)
            if job is not None:
                # Only the memory copy goes: a durable store keeps the completed row (and its count).
                q = self.queues.of(job.queue)
                if self.store.persistent:
                    q.completed.pop(job_id, None)
                    self.evicted_to_disk(job_id, job.queue)
                else:
                    q.forget_completed(job_id)
                self.drop_from_memory(job)
            self.add_proof(job_id)

    def find_job(self, job_id: Any) -> Job | None:
        """A job by id: in memory, or (a completed job evicted from memory) in the durable store."""
        if type(job_id) is not str:
            return None
        job = self.jobs.get(job_id)
        if job is None and self.store.persistent:
            found = self.store.load_job(job_id)
            if found is not None:
                job = found[0]
        return job

    def find_result(self, job_id: Any) -> tuple[bool, Any]:
        """(stored, value) of a job's result, looking in the durable store for evicted jobs."""
        if type(job_id) is not str:
            return False, None
        if job_id in self.results:
            return True, self.results[job_id]
        if self.store.persistent and job_id not in self.jobs:
            found = self.store.load_job(job_id)
            if found is not None and found[2]:
                return True, found[1]
        return False, None


def _ignore_eviction(job_id: str, queue: str) -> None:
    pass

"""Failing jobs: retries with backoff until success, the DLQ after the last attempt, UnrecoverableError."""
from __future__ import annotations

import threading
import time

from scenario import broker, queue_name, wait_until

from bunqueue import Job, Queue, UnrecoverableError, Worker

queue = Queue(queue_name("fail"), **broker())
flaky = queue.add("flaky", {"kind": "flaky"}, attempts=3, backoff=100)
doomed = queue.add("doomed", {"kind": "doomed"}, attempts=2, backoff=50)
fatal = queue.add("fatal", {"kind": "fatal"}, attempts=5)

lock = threading.Lock()
runs: dict[str, list[float]] = {flaky.id: [], doomed.id: [], fatal.id: []}


def process(job: Job) -> str:
    with lock:
        runs[job.id].append(time.monotonic())
        attempt = len(runs[job.id])
    kind = job.data["kind"]
    if kind == "fatal":
        raise UnrecoverableError("no point retrying")
    if kind == "doomed" or attempt < 3:
        raise ValueError(f"{kind} attempt {attempt} failed")
    return "third time lucky"


worker = Worker(queue.name, process, concurrency=3, poll_timeout_ms=200, **broker())
wait_until("the flaky job completed", lambda: queue.get_state(flaky.id) == "completed")
wait_until("the doomed job failed", lambda: queue.get_state(doomed.id) == "failed")
wait_until("the fatal job failed", lambda: queue.get_state(fatal.id) == "failed")
assert worker.close(timeout=15)

# Three runs of the flaky job, spaced by its exponential backoff (base 100 ms, at least half of 2^n x base).
assert len(runs[flaky.id]) == 3, runs
first_gap, second_gap = (b - a for a, b in zip(runs[flaky.id], runs[flaky.id][1:]))
assert first_gap >= 0.09 and second_gap >= 0.19, (first_gap, second_gap)
assert queue.get_result(flaky.id) == "third time lucky"
view = queue.get_job(flaky.id)
assert view.attempts == 2 and view.state == "completed", view.raw
assert view.raw["returnvalue"] == "third time lucky", view.raw

assert len(runs[doomed.id]) == 2 and len(runs[fatal.id]) == 1, runs
view = queue.get_job(doomed.id)
assert view.state == "failed" and view.attempts == 2, view.raw
assert view.raw["failedReason"] == "doomed attempt 2 failed", view.raw
# The worker sends the traceback's last lines as the stack; the broker keeps them.
assert view.stacktrace and "ValueError: doomed attempt 2 failed" in view.stacktrace[-1], view.stacktrace

counts = queue.get_job_counts()
assert counts["failed"] == 2 and counts["completed"] == 1 and counts["active"] == 0, counts
assert sorted(j.id for j in queue.get_failed()) == sorted([doomed.id, fatal.id])

dlq = queue.get_dlq()
assert sorted(entry["id"] for entry in dlq) == sorted([doomed.id, fatal.id]), dlq
fatal_entry = next(entry for entry in dlq if entry["id"] == fatal.id)
assert fatal_entry["attempts"] == 1 and fatal_entry["name"] == "fatal", fatal_entry

# Retrying one DLQ entry puts it back in the queue with its attempts reset.
assert queue.retry_dlq(fatal.id) == 1
assert queue.get_state(fatal.id) == "waiting"
assert queue.get_job(fatal.id).attempts == 0
assert [entry["id"] for entry in queue.get_dlq()] == [doomed.id]
assert queue.purge_dlq() == 1 and queue.get_dlq() == []
queue.close()
print("ok")

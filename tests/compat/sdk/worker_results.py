"""A Worker with concurrency runs jobs to completion: results, progress, logs, lock renewal, registration,
and the queries afterwards."""
from __future__ import annotations

import threading
import time
from typing import Any

from scenario import broker, queue_name, wait_until

from bunqueue import Job, Queue, Worker

JOBS = 40
CONCURRENCY = 8
# Job 0 outlives its lease (LOCK_MS) more than twice: only the worker's JobHeartbeatB renewals keep it.
LOCK_MS = 400
SLOW_S = 1.0

queue = Queue(queue_name("work"), **broker())
ids = queue.add_bulk([{"name": "square", "data": {"n": n}} for n in range(JOBS)])

lock = threading.Lock()
running = 0
peak = 0
seen_progress: dict[str, Any] = {}
completed: dict[str, Any] = {}


def process(job: Job) -> dict[str, int]:
    global running, peak
    with lock:
        running += 1
        peak = max(peak, running)
    try:
        job.update_progress(50, "half way")
        job.log(f"squaring {job.data['n']}")
        # Read back through another connection while the job is still active.
        seen_progress[job.id] = queue.get_progress(job.id)
        time.sleep(SLOW_S if job.data["n"] == 0 else 0.05)
        return {"square": job.data["n"] ** 2}
    finally:
        with lock:
            running -= 1


def on_completed(job: Job, result: Any) -> None:
    completed[job.id] = result


errors: list[BaseException] = []
worker = Worker(queue.name, process, concurrency=CONCURRENCY, lock_ttl_ms=LOCK_MS, heartbeat_interval_s=0.1,
                **broker())
worker.on("completed", on_completed)
worker.on("error", errors.append)
worker.wait_until_ready()
# The worker registers itself with RegisterWorker and heartbeats with Heartbeat.
wait_until("the worker in ListWorkers", lambda: any(
    w.get("name") == worker.name for w in queue.get_workers()))
registered = next(w for w in queue.get_workers() if w.get("name") == worker.name)
assert registered["queues"] == [queue.name] and registered["concurrency"] == CONCURRENCY, registered

wait_until("every job completed", lambda: len(completed) == JOBS)
assert 1 < peak <= CONCURRENCY, peak
assert errors == [], errors

counts = queue.get_job_counts()
assert counts["completed"] == JOBS and counts["active"] == 0 and counts["waiting"] == 0, counts
for n, job_id in enumerate(ids):
    assert completed[job_id] == {"square": n * n}, completed[job_id]
    assert queue.get_state(job_id) == "completed"
    assert queue.get_result(job_id) == {"square": n * n}
    assert seen_progress[job_id] == {"progress": 50, "message": "half way"}, seen_progress[job_id]
    view = queue.get_job(job_id)
    assert view.state == "completed" and view.progress == 50 and view.attempts == 0, view.raw
    assert view.raw["returnvalue"] == {"square": n * n}, view.raw
    assert view.completed_at is not None and view.started_at is not None, view.raw
    logs = queue.get_job_logs(job_id)
    assert [(row["message"], row["level"]) for row in logs] == [(f"squaring {n}", "info")], logs
assert queue.wait_for_job(ids[3], timeout_ms=1000) == {"square": 9}

# Logs can be added and trimmed from the queue side too.
queue.add_job_log(ids[1], "audited", level="warn")
rows = [(r["message"], r["level"]) for r in queue.get_job_logs(ids[1])]
assert rows == [("squaring 1", "info"), ("audited", "warn")], rows
queue.clear_job_logs(ids[1], keep_logs=1)
assert [r["message"] for r in queue.get_job_logs(ids[1])] == ["audited"], queue.get_job_logs(ids[1])
queue.clear_job_logs(ids[1])
assert queue.get_job_logs(ids[1]) == []
assert [j.id for j in queue.get_completed(0, 5)] and len(queue.get_completed()) == JOBS

assert worker.close(timeout=15)
wait_until("the worker gone from ListWorkers", lambda: all(
    w.get("name") != worker.name for w in queue.get_workers()))
queue.close()
print("ok")

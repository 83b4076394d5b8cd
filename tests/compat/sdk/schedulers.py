"""Job schedulers (Cron on the wire): upsert, list, get, the jobs they push to a Worker, options, remove."""
from __future__ import annotations

import math
import time
import uuid
from typing import Any

from scenario import broker, queue_name, wait_until

from bunqueue import Job, Queue, Worker

queue = Queue(queue_name("sched"), **broker())
tag = uuid.uuid4().hex[:8]
fast = f"fast-{tag}"
daily = f"daily-{tag}"

before = math.floor(time.time() * 1000)
queue.upsert_job_scheduler(
    fast, {"every": 250}, {"name": "tick", "data": {"v": 1}, "opts": {"attempts": 5, "priority": 3}}
)
queue.add_cron(daily, "0 9 * * *", {"v": 2}, tz="Asia/Tokyo", limit=4)

one = queue.get_job_scheduler(fast)
assert one is not None, "get_job_scheduler"
assert (one["name"], one["jobName"], one["queue"], one["repeatEvery"], one["priority"]) == (
    fast, "tick", queue.name, 250, 3
), one
assert before + 250 <= one["nextRun"] <= time.time() * 1000 + 250, one
other = queue.get_job_scheduler(daily)
assert other is not None
# 09:00 in Tokyo is midnight UTC.
assert (other["schedule"], other["timezone"], other["maxLimit"]) == ("0 9 * * *", "Asia/Tokyo", 4), other
assert other["nextRun"] % 86_400_000 == 0, other
assert sorted(s["name"] for s in queue.get_job_schedulers()) == sorted([daily, fast])
assert queue.get_job_schedulers_count() == 2

seen: list[dict[str, Any]] = []


def process(job: Job) -> None:
    # The SDK sends the template name inside data (the legacy envelope); the broker lifts it to the job's
    # top-level name, where the SDK's own Job.name (which reads data.name) does not look.
    seen.append({"name": job.raw["name"], "data": job.data, "maxAttempts": job.raw["maxAttempts"],
                 "priority": job.raw["priority"]})


errors: list[BaseException] = []
worker = Worker(queue.name, process, concurrency=2, **broker())
worker.on("error", errors.append)
worker.wait_until_ready()
wait_until("three runs of the every scheduler", lambda: len(seen) >= 3)
assert seen[0] == {"name": "tick", "data": {"v": 1}, "maxAttempts": 5, "priority": 3}, seen[0]

queue.remove_job_scheduler(fast)
assert queue.get_job_scheduler(fast) is None
assert [s["name"] for s in queue.get_job_schedulers()] == [daily]
count = len(seen)
time.sleep(0.6)
assert len(seen) <= count + 1, len(seen) - count
queue.remove_job_scheduler(daily)
assert queue.get_job_schedulers() == []
assert worker.close(timeout=15)
assert errors == [], errors
queue.close()
print("ok")

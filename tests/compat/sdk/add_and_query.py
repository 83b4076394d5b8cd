"""Queue.add and add_bulk, then every query the SDK offers on jobs that are still queued."""
from __future__ import annotations

import msgpack
from scenario import broker, queue_name

from bunqueue import CommandError, Queue

queue = Queue(queue_name("add"), **broker())

job = queue.add("send", {"to": "a@example.com"}, priority=5, attempts=4, tags=["mail"])
got = queue.get_job(job.id)
assert got is not None and got.id == job.id, got
# The SDK sends the name inside `data` (the legacy envelope); the broker lifts it out to the job's
# top-level `name` and keeps `data` as the caller's payload, as the Bun original does.
assert got.raw["name"] == "send", got.raw
assert got.data == {"to": "a@example.com"}, got.data
# So the SDK's own Job.name, which reads data.name, finds nothing against the original either.
assert got.name is None
assert (got.priority, got.max_attempts, got.attempts, got.tags) == (5, 4, 0, ["mail"]), got.raw
assert got.queue == queue.name and got.state == "prioritized", got.raw
assert queue.get_state(job.id) == "prioritized"

# A payload that is not a dict travels as {"name": ..., "payload": value}.
scalar = queue.add("scalar", 42)
assert queue.get_job(scalar.id).data == {"payload": 42}

ids = queue.add_bulk(
    [{"name": "bulk", "data": {"i": i}} for i in range(5)]
    + [{"name": "custom", "data": {"i": 5}, "job_id": f"order-{queue.name}"}]
)
assert len(ids) == 6 and len(set(ids)) == 6, ids
assert ids[-1] == f"order-{queue.name}", ids
by_custom = queue.get_job_by_custom_id(f"order-{queue.name}")
assert by_custom is not None and by_custom.id == ids[-1] and by_custom.data == {"i": 5}, by_custom
assert [queue.get_job(i).data["i"] for i in ids] == list(range(6))

later = queue.add("later", {"x": 1}, delay=60_000)
assert queue.get_state(later.id) == "delayed"

counts = queue.get_job_counts()
assert counts["waiting"] == 7 and counts["prioritized"] == 1 and counts["delayed"] == 1, counts
assert counts["active"] == 0 and counts["completed"] == 0 and counts["failed"] == 0, counts
assert queue.get_waiting_count() == 7 and queue.get_delayed_count() == 1
assert queue.count() == 9
assert queue.get_counts_per_priority() == {"0": 8, "5": 1}, queue.get_counts_per_priority()

waiting = queue.get_waiting()
assert sorted(j.id for j in waiting) == sorted([scalar.id, *ids]), [j.raw for j in waiting]
assert all(j.state == "waiting" for j in waiting)
assert [j.id for j in queue.get_delayed()] == [later.id]
assert [j.id for j in queue.get_prioritized()] == [job.id]

# No result yet. The Bun original writes the absent field as msgpack's "undefined" extension, which this
# SDK hands back as ExtType(0); this broker leaves the key out, so the SDK returns None.
assert queue.get_result(job.id) in (None, msgpack.ExtType(0, b"\x00")), queue.get_result(job.id)
# GetProgress answers only for an active job, here as in the original.
try:
    queue.get_progress(job.id)
    raise AssertionError("GetProgress of a queued job succeeded")
except CommandError as exc:
    assert str(exc) == "Job is not active (current state: prioritized)", exc
assert queue.get_job("no-such-job") is None
assert queue.get_state("no-such-job") == "unknown"

queue.remove(scalar.id)
assert queue.get_state(scalar.id) == "unknown"
assert queue.count() == 8
queue.close()
print("ok")

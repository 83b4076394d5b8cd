"""Auth with a token: the SDK authenticates on connect; no token or a wrong one gets nothing done."""
from __future__ import annotations

from scenario import broker, queue_name, wait_until

from bunqueue import AuthError, CommandError, Job, Queue, Worker

args = broker()
assert "token" in args, "this scenario needs COMPAT_TOKEN"
name = queue_name("auth")

queue = Queue(name, **args)
job = queue.add("secured", {"n": 1})
assert queue.get_state(job.id) == "waiting"
assert queue.ping()

results: dict[str, int] = {}


def process(job: Job) -> int:
    return job.data["n"] + 1


worker = Worker(name, process, concurrency=2, **args)
worker.on("completed", lambda job, result: results.__setitem__(job.id, result))
wait_until("the job completed", lambda: results.get(job.id) == 2)
assert worker.close(timeout=15)
assert queue.get_result(job.id) == 2

anonymous = Queue(name, host=args["host"], port=args["port"])
try:
    anonymous.add("sneaky", {})
    raise AssertionError("PUSH without a token succeeded")
except CommandError as exc:
    assert str(exc) == "Not authenticated", exc
assert not anonymous.ping()
anonymous.close()

impostor = Queue(name, host=args["host"], port=args["port"], token="wrong-token")
try:
    impostor.count()
    raise AssertionError("a wrong token was accepted")
except AuthError as exc:
    assert str(exc) == "Invalid token", exc
impostor.close()

assert queue.get_job_counts()["completed"] == 1 and queue.count() == 0
queue.close()
print("ok")

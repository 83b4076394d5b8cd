"""Crons and repeating jobs through the handler table on a fake clock: the runs a cron pushes, the rule
that drops a cron-spawned job whose attempt was lost, and the successor of a repeating job."""
from __future__ import annotations

from bunqueue._core.jobfactory import JobFactory
from bunqueue._testbase.clock import T0
from bunqueue._testbase.inprocess import QUEUE, World
from bunqueue.broker import states
from bunqueue.broker.recovery import restore
from bunqueue.broker.timers.deadlines import CRON, LEASES, STALLS
from bunqueue.broker.timers.stalls import STALL_CONFIRM_MS
from bunqueue.errors import CommandError
from bunqueue.storage.schema import Snapshot


def spawned(world: World, **pull: object) -> tuple[str, str | None]:
    """A cron's first run, pulled (with a lease when ``owner`` is given); the logs so far are dropped."""
    reply = world.send({"cmd": "Cron", "name": "c", "queue": QUEUE, "data": {"v": 1}, "repeatEvery": 3_600_000,
                        "immediately": True, "jobOptions": {"maxAttempts": 3}})
    assert reply["ok"] and reply["cron"]["nextRun"] == T0, reply
    assert (CRON, T0) in world.armed
    assert world.settle(CRON, T0) == T0 + 3_600_000
    job, token = world.pull(**pull)
    assert job.unique_key == "cron:c" and job.data == {"v": 1}
    world.store.take()
    world.take_events()
    return job.id, token


def dropped(world: World, job_id: str) -> None:
    assert job_id not in world.broker.jobs
    assert world.store.take() == [("job_removed", job_id)]
    counts = world.send({"cmd": "GetJobCounts", "queue": QUEUE})["counts"]
    assert counts["waiting"] == counts["active"] == counts["delayed"] == counts["failed"] == 0
    # Its key is free: the next run is queued, not absorbed by the lost one.
    assert world.settle(CRON, T0 + 3_600_000) == T0 + 7_200_000
    assert world.send({"cmd": "GetJobCounts", "queue": QUEUE})["counts"]["waiting"] == 1


def test_an_expired_lease_drops_a_spawned_job(world: World) -> None:
    job_id, _ = spawned(world, owner="w", lockTtl=1000)
    world.settle(LEASES, T0 + 1001)
    dropped(world, job_id)


def test_a_confirmed_stall_drops_a_spawned_job(world: World) -> None:
    world.send({"cmd": "SetStallConfig", "queue": QUEUE, "config": {"stallInterval": 1000, "gracePeriod": 0}})
    job_id, _ = spawned(world)
    world.settle(STALLS, T0 + 1000)
    world.settle(STALLS, T0 + 1001)
    world.settle(STALLS, T0 + 1001 + STALL_CONFIRM_MS)
    dropped(world, job_id)


def test_a_closed_connection_drops_a_spawned_job(world: World) -> None:
    job_id, _ = spawned(world)
    assert world.broker.release_session(world.session) == 1
    dropped(world, job_id)


def test_a_restart_drops_an_interrupted_spawned_job(world: World) -> None:
    job = JobFactory().build({"name": "n", "data": 1, "uniqueKey": "cron:c"}, QUEUE, T0 - 5000, False)
    job.state = states.ACTIVE
    job.started_at = T0 - 100
    restore(world.broker, Snapshot(jobs=[job]))
    assert job.id not in world.broker.jobs
    assert world.store.take() == [("job_removed", job.id)]
    # The key was not taken by the dropped job.
    assert world.push(uniqueKey="cron:c") != job.id


def test_a_failed_spawned_job_is_retried_like_any_other(world: World) -> None:
    job_id, _ = spawned(world)
    assert world.send({"cmd": "FAIL", "id": job_id, "error": "boom"}) == {"ok": True}
    job = world.job(job_id)
    assert (job.state, job.attempts) == (states.DELAYED, 1)


def test_ack_pushes_the_successor_of_a_repeating_job(world: World) -> None:
    job_id = world.push(repeat={"every": 1000, "limit": 1})
    world.pull()
    world.clock.set(T0 + 250)
    assert world.send({"cmd": "ACK", "id": job_id}) == {"ok": True}
    (successor,) = [job for job in world.broker.jobs.values() if job.id != job_id]
    assert (successor.state, successor.run_at, successor.created_at) == (states.DELAYED, T0 + 1250, T0 + 250)
    assert successor.repeat == {"every": 1000, "limit": 1, "count": 1, "prevMillis": T0 + 1250}
    # count 1 reached the limit: its own ACK pushes nothing.
    world.clock.set(T0 + 1250)
    world.pull()
    world.send({"cmd": "ACK", "id": successor.id})
    assert len(world.broker.jobs) == 2


def test_a_run_whose_push_fails_is_told_as_missed(world: World) -> None:
    told: list[tuple[str, dict[str, object]]] = []
    world.broker.events.notices.append(lambda name, data: told.append((name, data)))
    world.send({"cmd": "Cron", "name": "c", "queue": QUEUE, "data": {}, "repeatEvery": 1000, "immediately": True})
    told.clear()

    def refused(queue: str, opts: dict[str, object]) -> str:
        raise CommandError("queue refused the job")

    world.broker.crons.push = refused
    world.settle(CRON, T0)
    # Told as the original writes a thrown error; the run stays counted and the next one is scheduled.
    assert told == [("cron:missed", {"name": "c", "queue": QUEUE, "error": "Error: queue refused the job"})]
    assert world.broker.crons.get("c").executions == 1

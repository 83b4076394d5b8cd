"""Job control in PostgreSQL mode: the memory engine's replies frame for frame (refusals included), what
the rows hold afterwards, and two brokers changing one job."""
from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from bunqueue import errors
from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins
from bunqueue.broker import states
from tests.storage.postgres.ops.conftest import postgres_broker
from tests.storage.postgres.ops.rows import job_record, job_row

pytestmark = pytest.mark.usefixtures("postgres")


def _names(reply: dict[str, Any]) -> list[str]:
    return [job["name"] for job in reply["jobs"]]


# What a pull answers of a job that ran before, besides its timeline: the claim does not keep the
# earlier attempts' entries in the row yet.
PULLED = ("name", "data", "attempts", "priority", "lifo", "progress", "completedAt")


def _same_pull(twins: Twins, frame: dict[str, Any]) -> dict[str, Any]:
    memory, postgres = twins.both(frame)
    assert (memory["job"] is None) == (postgres["job"] is None), (memory, postgres)
    if memory["job"] is not None:
        assert {k: postgres["job"][k] for k in PULLED} == {k: memory["job"][k] for k in PULLED}
        assert postgres["job"]["id"] == twins.postgres_ids[0]
    return postgres


def test_cancel_update_and_change_priority_as_in_memory(twins: Twins) -> None:
    twins.same({"cmd": "PUSHB", "queue": "jc-cup", "jobs": [
        {"name": "a", "data": {"v": 1}}, {"name": "b", "data": 2}, {"name": "c", "data": 3, "delay": 60000},
        {"name": "d", "data": 4},
    ]})
    assert twins.same({"cmd": "Update", "id": "$0", "data": {"v": 100, "extra": [1]}}) == {"ok": True}
    assert twins.same({"cmd": "Update", "id": "$2", "data": "later"}) == {"ok": True}
    assert twins.same({"cmd": "Update", "id": "nope", "data": 1}) == {"ok": False, "error": errors.CANNOT_UPDATE}
    assert twins.same({"cmd": "ChangePriority", "id": "$1", "priority": 9}) == {"ok": True}
    assert twins.same({"cmd": "ChangePriority", "id": "$2", "priority": "4"}) == {"ok": True}
    assert twins.same({"cmd": "ChangePriority", "id": "nope", "priority": 1})["error"] == errors.NOT_IN_QUEUE
    assert twins.same({"cmd": "Cancel", "id": "$0"}) == {"ok": True}
    assert twins.same({"cmd": "Cancel", "id": "$0"}) == {"ok": False, "error": errors.CANNOT_CANCEL}
    assert twins.same({"cmd": "Cancel", "id": "$2"}) == {"ok": True}
    pulled = twins.same({"cmd": "PULL", "queue": "jc-cup", "owner": "o"})
    assert (pulled["job"]["name"], pulled["job"]["priority"], pulled["job"]["data"]) == ("b", 9, 2)
    # A running job can be updated but neither cancelled nor reprioritized.
    assert twins.same({"cmd": "Update", "id": "$1", "data": "new"}) == {"ok": True}
    assert twins.same({"cmd": "Cancel", "id": "$1"})["error"] == errors.CANNOT_CANCEL
    assert twins.same({"cmd": "ChangePriority", "id": "$1", "priority": 2})["error"] == errors.NOT_IN_QUEUE
    assert twins.same({"cmd": "PULL", "queue": "jc-cup"})["job"]["name"] == "d"
    assert twins.same({"cmd": "PULL", "queue": "jc-cup"})["job"] is None


def test_update_keeps_what_the_row_holds(postgres: PostgresServer, pg_server: ServerProcess) -> None:
    client = RawClient(pg_server.addr)
    job_id = client.ok({"cmd": "PUSH", "queue": "jc-update-row", "data": 1, "priority": 3})["id"]
    client.ok({"cmd": "ChangePriority", "id": job_id, "priority": 7, "lifo": True})
    client.ok({"cmd": "Update", "id": job_id, "data": {"k": [1, 2]}})
    job = job_record(postgres, pg_server, job_id)
    assert (job.data, job.priority, job.lifo) == ({"k": [1, 2]}, 7, True)
    row = job_row(postgres, pg_server, job_id)
    assert row is not None and (row["priority"], row["lifo"], row["state"]) == (7, True, states.READY)
    client.close()


def test_change_priority_and_lifo_order_pulls_as_in_memory(twins: Twins) -> None:
    twins.same({"cmd": "PUSHB", "queue": "jc-lifo", "jobs": [
        {"name": "a", "data": 1, "priority": 1}, {"name": "b", "data": 2, "priority": 1},
        {"name": "c", "data": 3, "priority": 1},
    ]})
    assert twins.same({"cmd": "ChangePriority", "id": "$2", "priority": 1, "lifo": True}) == {"ok": True}
    assert twins.same({"cmd": "ChangePriority", "id": "$0", "priority": 0}) == {"ok": True}
    pulled = twins.same({"cmd": "PULLB", "queue": "jc-lifo", "count": 5})
    assert _names(pulled) == ["c", "b", "a"]
    assert [job["priority"] for job in pulled["jobs"]] == [1, 1, 0]


def test_promote_and_promote_jobs_as_in_memory(twins: Twins) -> None:
    twins.same({"cmd": "PUSHB", "queue": "jc-prm", "jobs": [
        {"name": "d1", "data": 1, "delay": 60000}, {"name": "d2", "data": 2, "delay": 60000},
        {"name": "d3", "data": 3, "delay": 60000}, {"name": "d4", "data": 4, "delay": 60000}, {"name": "w", "data": 5},
    ]})
    assert twins.same({"cmd": "Promote", "id": "$0"}) == {"ok": True}
    assert twins.same({"cmd": "Promote", "id": "$0"}) == {"ok": False, "error": errors.NOT_DELAYED}
    assert twins.same({"cmd": "Promote", "id": "$4"})["error"] == errors.NOT_DELAYED
    assert twins.same({"cmd": "Promote", "id": "nope"})["error"] == errors.NOT_DELAYED
    assert twins.same({"cmd": "PromoteJobs", "queue": "jc-prm", "count": 1}) == {"ok": True, "count": 1}
    assert twins.same({"cmd": "PromoteJobs", "queue": "jc-prm", "count": 0}) == {"ok": True, "count": 0}
    assert twins.same({"cmd": "PromoteJobs", "queue": "jc-prm"}) == {"ok": True, "count": 2}
    assert twins.same({"cmd": "PromoteJobs", "queue": "jc-prm"}) == {"ok": True, "count": 0}
    assert twins.same({"cmd": "PromoteJobs", "queue": "jc-none"}) == {"ok": True, "count": 0}
    # A promoted job waits behind the jobs that were ready before it.
    assert _names(twins.same({"cmd": "PULLB", "queue": "jc-prm", "count": 10})) == ["w", "d1", "d2", "d3", "d4"]


def test_delays_and_moves_as_in_memory(twins: Twins, postgres: PostgresServer, pg_server: ServerProcess) -> None:
    twins.same({"cmd": "PUSH", "queue": "jc-mtd", "name": "m", "data": 1})
    memory, pg = twins.both({"cmd": "PULL", "queue": "jc-mtd", "owner": "o"})
    twins.memory_ids.append(memory["token"])
    twins.postgres_ids.append(pg["token"])
    job_id = pg["job"]["id"]
    refused = twins.same({"cmd": "MoveToDelayed", "id": "$0", "delay": 60000, "token": "wrong"})
    assert refused == {"ok": False, "error": errors.invalid_lock_token(job_id)}
    assert twins.same({"cmd": "MoveToDelayed", "id": "$0", "delay": 60000})["error"] == \
        errors.lock_token_required(job_id)
    assert twins.same({"cmd": "ChangeDelay", "id": "$0", "delay": 60000, "token": "wrong"})["ok"] is False
    assert twins.same({"cmd": "MoveToWait", "id": "$0"})["ok"] is False
    assert twins.same({"cmd": "MoveToDelayed", "id": "$0", "delay": 60000, "token": "$1"}) == {"ok": True}
    row = job_row(postgres, pg_server, job_id)
    assert row is not None and (row["state"], row["attempts"], row["lease_token"]) == (states.DELAYED, 0, None)
    assert 59000 <= row["run_at"] - row["now"] <= 60000
    assert twins.same({"cmd": "ChangeDelay", "id": "$0", "delay": "120000"}) == {"ok": True}
    row = job_row(postgres, pg_server, job_id)
    assert row is not None and 119000 <= row["run_at"] - row["now"] <= 120000
    assert twins.same({"cmd": "MoveToWait", "id": "$0"}) == {"ok": True}
    assert twins.same({"cmd": "MoveToWait", "id": "$0"}) == {"ok": True}
    assert _same_pull(twins, {"cmd": "PULL", "queue": "jc-mtd"})["job"]["name"] == "m"
    assert twins.same({"cmd": "MoveToWait", "id": "$0"}) == {"ok": True}
    for frame in ({"cmd": "MoveToWait", "id": "nope"}, {"cmd": "ChangeDelay", "id": "nope", "delay": 5},
                  {"cmd": "MoveToDelayed", "id": "nope", "delay": 5}):
        twins.same(frame)
    assert twins.same({"cmd": "MoveToDelayed", "id": "$0", "delay": 60000}) == {"ok": True}
    # A negative delay is a past run time: ahead of the jobs that were ready before.
    twins.same({"cmd": "PUSH", "queue": "jc-mtd", "name": "ready", "data": 2})
    assert twins.same({"cmd": "ChangeDelay", "id": "$0", "delay": -5000}) == {"ok": True}
    assert _same_pull(twins, {"cmd": "PULL", "queue": "jc-mtd"})["job"]["name"] == "m"


def test_moves_of_a_finished_job_are_refused_as_in_memory(twins: Twins) -> None:
    twins.same({"cmd": "PUSH", "queue": "jc-done", "data": 1})
    memory, pg = twins.both({"cmd": "PULL", "queue": "jc-done", "owner": "o"})
    twins.memory_ids.append(memory["token"])
    twins.postgres_ids.append(pg["token"])
    assert twins.same({"cmd": "ACK", "id": "$0", "token": "$1"}) == {"ok": True}
    assert twins.same({"cmd": "MoveToWait", "id": "$0"})["error"] == errors.cannot_move_to_wait("completed")
    assert twins.same({"cmd": "MoveToDelayed", "id": "$0", "delay": 10})["error"] == errors.not_active("completed")
    assert twins.same({"cmd": "ChangeDelay", "id": "$0", "delay": 10})["error"] == errors.CANNOT_CHANGE_DELAY
    assert twins.same({"cmd": "Update", "id": "$0", "data": 2})["error"] == errors.CANNOT_UPDATE
    assert twins.same({"cmd": "Progress", "id": "$0", "progress": 5})["error"] == errors.not_active("completed")


def test_progress_lives_in_the_record(twins: Twins, postgres: PostgresServer, pg_server: ServerProcess) -> None:
    twins.same({"cmd": "PUSHB", "queue": "jc-progress", "jobs": [{"data": 1}, {"data": 2, "priority": 2}]})
    assert twins.same({"cmd": "Progress", "id": "$0", "progress": 5})["error"] == errors.not_active("waiting")
    assert twins.same({"cmd": "Progress", "id": "nope", "progress": 5})["error"] == errors.JOB_NOT_FOUND
    pulled = twins.same({"cmd": "PULL", "queue": "jc-progress", "owner": "o"})
    job_id = pulled["job"]["id"]
    assert twins.same({"cmd": "Progress", "id": "$1", "progress": 150, "message": "half"}) == {"ok": True}
    job = job_record(postgres, pg_server, job_id)
    assert (job.progress, job.progress_message) == (100, "half")
    assert twins.same({"cmd": "Progress", "id": "$1", "progress": {"step": 2}}) == {"ok": True}
    job = job_record(postgres, pg_server, job_id)
    assert (job.progress, job.progress_message) == (0, '{"step":2}')
    assert twins.same({"cmd": "Progress", "id": "$1", "progress": "42"}) == {"ok": True}
    assert job_record(postgres, pg_server, job_id).progress == 42
    assert twins.same({"cmd": "Progress", "id": "$1", "progress": 1, "message": 3})["ok"] is False


def test_a_job_cancelled_on_one_broker_is_gone_for_another(postgres: PostgresServer) -> None:
    namespace = f"jc-two-{uuid.uuid4().hex[:8]}"
    first, second = postgres_broker(postgres, namespace), postgres_broker(postgres, namespace)
    try:
        a, b = RawClient(first.addr), RawClient(second.addr)
        job_id = a.ok({"cmd": "PUSH", "queue": "jc-two", "data": 1})["id"]
        b.ok({"cmd": "Cancel", "id": job_id})
        assert a.call({"cmd": "Cancel", "id": job_id}) == {"ok": False, "error": errors.CANNOT_CANCEL}
        assert a.call({"cmd": "ChangePriority", "id": job_id, "priority": 1})["error"] == errors.NOT_IN_QUEUE
        assert a.ok({"cmd": "PULL", "queue": "jc-two"})["job"] is None
        # A delayed job promoted on one broker wakes a long-poll waiting on the other.
        delayed = a.ok({"cmd": "PUSH", "queue": "jc-two", "data": 2, "delay": 600000})["id"]
        waiting: list[dict[str, Any]] = []
        poller = threading.Thread(target=lambda: waiting.append(
            RawClient(first.addr, timeout=10).call({"cmd": "PULL", "queue": "jc-two", "timeout": 8000})))
        poller.start()
        b.ok({"cmd": "Promote", "id": delayed})
        poller.join()
        assert waiting[0]["job"]["id"] == delayed
        a.close()
        b.close()
    finally:
        first.stop()
        second.stop()


def test_two_brokers_moving_one_job_never_both_win(postgres: PostgresServer) -> None:
    namespace = f"jc-race-{uuid.uuid4().hex[:8]}"
    brokers = [postgres_broker(postgres, namespace), postgres_broker(postgres, namespace)]
    try:
        clients = [RawClient(broker.addr) for broker in brokers]
        for _ in range(10):
            job_id = clients[0].ok({"cmd": "PUSH", "queue": "jc-race", "data": 1, "delay": 600000})["id"]
            replies = _at_once([(client, {"cmd": "Promote", "id": job_id}) for client in clients])
            assert sorted(reply["ok"] for reply in replies) == [False, True], replies
        for client in clients:
            client.close()
    finally:
        for broker in brokers:
            broker.stop()


def _at_once(calls: list[tuple[RawClient, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each client sends its frame at the same moment, from its own thread; the replies."""
    replies: list[dict[str, Any]] = []
    start = threading.Barrier(len(calls))

    def send(client: RawClient, frame: dict[str, Any]) -> None:
        start.wait()
        replies.append(client.call(frame))

    threads = [threading.Thread(target=send, args=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return replies


def test_discard_files_the_job_in_the_dlq_as_in_memory(
    twins: Twins, postgres: PostgresServer, pg_server: ServerProcess
) -> None:
    twins.same({"cmd": "PUSHB", "queue": "jc-discard", "jobs": [
        {"name": "w", "data": 1}, {"name": "d", "data": 2, "delay": 60000},
        {"name": "r", "data": 3, "priority": 5, "removeOnFail": True, "uniqueKey": "k"},
    ]})
    assert twins.same({"cmd": "Discard", "id": "nope"}) == {"ok": False, "error": errors.JOB_NOT_FOUND}
    assert twins.same({"cmd": "Discard", "id": "$0"}) == {"ok": True}
    assert twins.same({"cmd": "Discard", "id": "$0"}) == {"ok": False, "error": errors.JOB_NOT_FOUND}
    assert twins.same({"cmd": "GetState", "id": "$0"})["state"] == "failed"
    assert twins.same({"cmd": "Discard", "id": "$1"}) == {"ok": True}
    # A running job moves only for its lease's token, is charged no attempt, and frees its unique key;
    # removeOnFail does not keep it out of the DLQ.
    memory, pg = twins.both({"cmd": "PULL", "queue": "jc-discard", "owner": "o"})
    twins.memory_ids.append(memory["token"])
    twins.postgres_ids.append(pg["token"])
    token = f"${len(twins.postgres_ids) - 1}"
    assert pg["job"]["name"] == "r"
    job_id = pg["job"]["id"]
    assert twins.same({"cmd": "Discard", "id": "$2"})["error"] == errors.lock_token_required(job_id)
    assert twins.same({"cmd": "Discard", "id": "$2", "token": "wrong"})["error"] == errors.invalid_lock_token(job_id)
    assert twins.same({"cmd": "Discard", "id": "$2", "token": token}) == {"ok": True}
    row = job_row(postgres, pg_server, job_id)
    assert row is not None
    assert (row["state"], row["attempts"], row["lease_token"], row["unique_key"]) == (states.FAILED, 0, None, None)
    for frame in ({"cmd": "GetJob", "id": "$0"}, {"cmd": "GetJob", "id": "$2"},
                  {"cmd": "GetJobCounts", "queue": "jc-discard"}, {"cmd": "Dlq", "queue": "jc-discard"}):
        twins.same(frame)
    entries = twins.same({"cmd": "Dlq", "queue": "jc-discard"})["entries"]
    assert [(e["reason"], e["error"], [a["reason"] for a in e["attempts"]]) for e in entries] == \
        [("unknown", None, ["unknown"])] * 3
    assert twins.same({"cmd": "PUSH", "queue": "jc-discard", "name": "u", "data": 4, "uniqueKey": "k"})["ok"] is True
    # Run times are whole milliseconds in PostgreSQL (finer in memory), and a job back from the DLQ keeps its
    # admission seq: in the push's own millisecond it would run first there. A millisecond later, both agree.
    time.sleep(0.002)
    # A discarded job goes back through its DLQ entry; a finished one cannot be discarded.
    assert twins.same({"cmd": "MoveToWait", "id": "$0"}) == {"ok": True}
    assert twins.same({"cmd": "GetState", "id": "$0"})["state"] == "waiting"
    twins.same({"cmd": "Dlq", "queue": "jc-discard"})
    memory, pg = twins.both({"cmd": "PULLB", "queue": "jc-discard", "count": 10})
    assert _names(pg) == _names(memory) == ["u", "w"]
    for client, reply in ((twins.memory, memory), (twins.postgres, pg)):
        job_id = reply["jobs"][0]["id"]
        assert client.call({"cmd": "ACK", "id": job_id}) == {"ok": True}
        assert client.call({"cmd": "Discard", "id": job_id}) == {"ok": False, "error": errors.JOB_NOT_FOUND}


def test_two_brokers_discarding_one_job_never_both_win(postgres: PostgresServer) -> None:
    namespace = f"jc-discard-race-{uuid.uuid4().hex[:8]}"
    brokers = [postgres_broker(postgres, namespace), postgres_broker(postgres, namespace)]
    try:
        clients = [RawClient(broker.addr) for broker in brokers]
        for _ in range(10):
            job_id = clients[0].ok({"cmd": "PUSH", "queue": "jc-discard-race", "data": 1})["id"]
            replies = _at_once([(client, {"cmd": "Discard", "id": job_id}) for client in clients])
            assert sorted(reply["ok"] for reply in replies) == [False, True], replies
        dlq = clients[1].ok({"cmd": "Dlq", "queue": "jc-discard-race"})
        assert len(dlq["entries"]) == 10
        assert all(len(entry["attempts"]) == 1 for entry in dlq["entries"])
        for client in clients:
            client.close()
    finally:
        for broker in brokers:
            broker.stop()

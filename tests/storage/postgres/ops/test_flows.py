"""Flows and dependencies on PostgreSQL: PUSHF, dependsOn at push, UpdateParent and the flow dependency
commands answered as the memory engine answers them, and a parent released by children completed on
another broker."""
from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.postgres import PostgresServer
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.twins import Twins
from bunqueue.broker import states
from tests.storage.postgres.ops.conftest import postgres_broker

pytestmark = pytest.mark.usefixtures("postgres")


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def graph(parent: str, parent_queue: str, children: list[tuple[str, str]], **child_opts: Any) -> list[dict[str, Any]]:
    """A PUSHF graph: ``parent`` waiting for ``children`` ((id, queue) pairs), each child linked back."""
    ids = [child_id for child_id, _ in children]
    jobs: list[dict[str, Any]] = [{"id": parent, "queue": parent_queue, "input": {
        "name": "parent", "data": {"__childrenIds": ids}, "childrenIds": ids, "dependsOn": ids}}]
    for child_id, queue in children:
        jobs.append({"id": child_id, "queue": queue, "input": {
            "name": child_id, "data": {"__parentId": parent, "__parentQueue": parent_queue},
            "parentId": parent, **child_opts}})
    return jobs


def pull(twins: Twins, queue: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """One job of ``queue`` on each server, leased to an owner; the replies, compared."""
    memory, postgres = twins.both({"cmd": "PULL", "queue": queue, "owner": "w", "lockTtl": 60000})
    named_memory, named_postgres = twins.memory_names(memory), twins.postgres_names(postgres)
    job_memory, job_postgres = named_memory.get("job") or {}, named_postgres.get("job") or {}
    differing = {key: (job_memory.get(key), job_postgres.get(key))
                 for key in job_memory.keys() | job_postgres.keys() if job_memory.get(key) != job_postgres.get(key)}
    assert named_postgres == named_memory, differing or (memory, postgres)
    return memory, postgres


def ack(twins: Twins, pulled: tuple[dict[str, Any], dict[str, Any]], result: Any = None) -> None:
    memory, postgres = pulled
    frame: dict[str, Any] = {"cmd": "ACK"} if result is None else {"cmd": "ACK", "result": result}
    got_memory = twins.memory.call({**frame, "id": memory["job"]["id"], "token": memory["token"]})
    got_postgres = twins.postgres.call({**frame, "id": postgres["job"]["id"], "token": postgres["token"]})
    assert got_memory == got_postgres == {"ok": True}


def fail(twins: Twins, pulled: tuple[dict[str, Any], dict[str, Any]], error: str) -> None:
    memory, postgres = pulled
    got_memory = twins.memory.call({"cmd": "FAIL", "id": memory["job"]["id"], "token": memory["token"], "error": error})
    got_postgres = twins.postgres.call(
        {"cmd": "FAIL", "id": postgres["job"]["id"], "token": postgres["token"], "error": error})
    assert got_memory == got_postgres == {"ok": True}


def test_a_dependency_chain_runs_link_by_link(twins: Twins) -> None:
    queue = _unique("dep-chain")
    twins.same({"cmd": "PUSH", "queue": queue, "name": "A", "data": 1})
    twins.same({"cmd": "PUSH", "queue": queue, "name": "B", "data": 2, "dependsOn": ["$0"]})
    twins.same({"cmd": "PUSH", "queue": queue, "name": "C", "data": 3, "dependsOn": ["$1"]})
    first = pull(twins, queue)
    assert first[1]["job"]["name"] == "A"
    assert pull(twins, queue)[1]["job"] is None
    ack(twins, first)
    second = pull(twins, queue)
    assert second[1]["job"]["name"] == "B"
    ack(twins, second)
    third = pull(twins, queue)
    assert (third[1]["job"]["name"], third[1]["job"]["dependsOn"]) == ("C", [twins.postgres_ids[1]])


def test_a_push_refuses_missing_and_own_dependencies(twins: Twins) -> None:
    queue = _unique("dep-refused")
    own = _unique("own")
    reply = twins.same({"cmd": "PUSH", "queue": queue, "data": 1, "dependsOn": ["no-such-job"]})
    assert reply == {"ok": False, "error": "Dependency job not found: no-such-job"}
    assert twins.same({"cmd": "PUSH", "queue": queue, "data": 1, "jobId": own, "dependsOn": [own]}) == {
        "ok": False, "error": f"Job cannot depend on itself: {own}"}
    assert twins.same({"cmd": "PUSHB", "queue": queue, "jobs": [{"data": 1, "customId": own, "dependsOn": [own]}]}) == {
        "ok": False, "error": f"jobs[0]: Job cannot depend on itself: {own}"}
    reply = twins.same({"cmd": "PUSHB", "queue": queue, "jobs": [{"data": 1}, {"data": 2, "dependsOn": ["ghost"]}]})
    assert reply == {"ok": False, "error": "jobs[1]: Dependency job not found: ghost"}
    # Nothing of a refused request was admitted.
    assert pull(twins, queue)[1]["job"] is None


def test_a_dependency_on_a_completed_job_is_met_at_once(twins: Twins) -> None:
    queue = _unique("dep-done")
    twins.same({"cmd": "PUSH", "queue": queue, "name": "A", "data": 1})
    ack(twins, pull(twins, queue))
    twins.same({"cmd": "PUSH", "queue": queue, "name": "B", "data": 2, "dependsOn": ["$0"]})
    assert pull(twins, queue)[1]["job"]["name"] == "B"


def test_pushb_jobs_may_depend_on_later_jobs_of_the_batch(twins: Twins) -> None:
    queue = _unique("pbd")
    child, parent = _unique("pbd-child"), _unique("pbd-parent")
    twins.same({"cmd": "PUSHB", "queue": queue, "jobs": [
        {"name": "child", "data": 1, "customId": child, "dependsOn": [parent]},
        {"name": "parent", "data": 2, "customId": parent}]})
    first = pull(twins, queue)
    assert first[1]["job"]["id"] == parent
    assert pull(twins, queue)[1]["job"] is None
    ack(twins, first)
    assert pull(twins, queue)[1]["job"]["id"] == child


def test_pushf_runs_the_parent_once_its_children_completed_and_keeps_their_results(twins: Twins) -> None:
    parent, kid_a, kid_b = _unique("fp"), _unique("fa"), _unique("fb")
    parents, children, others = _unique("flow-p"), _unique("flow-c"), _unique("flow-d")
    jobs = graph(parent, parents, [(kid_a, children), (kid_b, others)])
    reply = twins.same({"cmd": "PUSHF", "jobs": jobs})
    assert [job["id"] for job in reply["data"]["jobs"]] == [parent, kid_a, kid_b]
    assert twins.same({"cmd": "PUSHF", "jobs": jobs}) == {"ok": False, "error": f"Flow job {parent} already exists"}
    assert twins.same({"cmd": "PUSHF", "jobs": []}) == {"ok": True, "data": {"jobs": []}}
    assert pull(twins, parents)[1]["job"] is None
    ack(twins, pull(twins, children), {"rows": 10})
    values = twins.same({"cmd": "GetChildrenValues", "id": parent})
    assert values == {"ok": True, "data": {"values": {f"{children}:{kid_a}": {"rows": 10}}}}
    assert pull(twins, parents)[1]["job"] is None
    ack(twins, pull(twins, others), "two")
    assert twins.same({"cmd": "GetChildrenValues", "id": parent})["data"]["values"] == {
        f"{children}:{kid_a}": {"rows": 10}, f"{others}:{kid_b}": "two"}
    job = pull(twins, parents)[1]["job"]
    assert (job["id"], job["childrenIds"], job["dependsOn"]) == (parent, [kid_a, kid_b], [kid_a, kid_b])
    lonely = twins.same({"cmd": "PUSH", "queue": children, "data": 1})["id"]
    assert twins.postgres.call({"cmd": "GetChildrenValues", "id": lonely}) == {"ok": True, "data": {"values": {}}}


@pytest.mark.parametrize("item", [
    {"id": "a:b", "queue": "fv", "input": {"name": "x", "data": {}}},
    {"id": "m1", "queue": "fv", "input": {"name": "x", "data": {}, "dependsOn": ["ghost"]}},
    {"id": "n1", "queue": "fv", "input": {"name": "x", "data": 5}},
    {"id": "q1", "queue": "bad queue", "input": {"name": "x", "data": {}}},
])
def test_pushf_validation_refusals(twins: Twins, item: dict[str, Any]) -> None:
    reply = twins.same({"cmd": "PUSHF", "jobs": [item]})
    assert reply["ok"] is False and reply["error"]


def test_update_parent_links_a_child_and_its_completion_releases_the_parent(twins: Twins) -> None:
    queue = _unique("legacy")
    twins.same({"cmd": "PUSH", "queue": queue, "name": "parent", "data": {"p": True}})
    twins.same({"cmd": "PUSH", "queue": queue, "name": "child", "data": {"c": True}})
    assert twins.same({"cmd": "UpdateParent", "childId": "$1", "parentId": "$0"}) == {"ok": True}
    assert twins.same({"cmd": "UpdateParent", "childId": "$1", "parentId": "$1"})["ok"] is False
    assert twins.same({"cmd": "UpdateParent", "childId": "nope", "parentId": "$0"})["ok"] is False
    assert twins.same({"cmd": "UpdateParent", "childId": "$1", "parentId": "nope"})["ok"] is False
    child = pull(twins, queue)
    assert child[1]["job"]["id"] == twins.postgres_ids[1]
    assert child[1]["job"]["parentId"] == twins.postgres_ids[0]
    assert pull(twins, queue)[1]["job"] is None
    ack(twins, child, "child-done")
    # The keys name each server's own child id.
    memory, postgres = twins.both({"cmd": "GetChildrenValues", "id": "$0"})
    assert memory["data"]["values"] == {f"{queue}:{twins.memory_ids[1]}": "child-done"}
    assert postgres["data"]["values"] == {f"{queue}:{twins.postgres_ids[1]}": "child-done"}
    parent = pull(twins, queue)[1]["job"]
    assert (parent["childrenIds"], parent["data"]["__childrenIds"]) == ([twins.postgres_ids[1]],) * 2


def test_remove_child_dependency_and_unprocessed_children(twins: Twins) -> None:
    parent, kid_1, kid_2 = _unique("rp"), _unique("rk1"), _unique("rk2")
    parents, children = _unique("rm-p"), _unique("rm-c")
    twins.same({"cmd": "PUSHF", "jobs": graph(parent, parents, [(kid_1, children), (kid_2, children)])})
    assert twins.same({"cmd": "GetFailedChildrenValues", "id": parent}) == {"ok": True, "values": {}}
    assert twins.same({"cmd": "GetIgnoredChildrenFailures", "id": parent}) == {"ok": True, "values": {}}
    assert twins.same({"cmd": "RemoveChildDependency", "id": kid_1}) == {"ok": True, "removed": True}
    assert twins.same({"cmd": "RemoveChildDependency", "id": kid_1})["ok"] is False
    assert twins.same({"cmd": "RemoveChildDependency", "id": "nope"})["ok"] is False
    assert twins.same({"cmd": "RemoveUnprocessedChildren", "id": parent}) == {"ok": True}
    # kid_1 was detached, so it stays; kid_2 is gone and the parent still waits for it.
    detached = pull(twins, children)[1]["job"]
    assert (detached["id"], detached["parentId"], detached["data"]) == (kid_1, None, {})
    assert pull(twins, children)[1]["job"] is None
    assert pull(twins, parents)[1]["job"] is None


def test_removing_the_last_pending_child_releases_the_parent(twins: Twins) -> None:
    parent, kid = _unique("lp"), _unique("lk")
    parents, children = _unique("last-p"), _unique("last-c")
    twins.same({"cmd": "PUSHF", "jobs": graph(parent, parents, [(kid, children)])})
    twins.same({"cmd": "RemoveChildDependency", "id": kid})
    job = pull(twins, parents)[1]["job"]
    assert (job["id"], job["childrenIds"], job["dependsOn"], job["data"]) == (parent, [], [], {})


def test_move_to_waiting_children(twins: Twins) -> None:
    queue = _unique("mwc")
    twins.same({"cmd": "PUSH", "queue": queue, "name": "m", "data": {}})
    assert twins.same({"cmd": "MoveToWaitingChildren", "id": "$0"}) == {"ok": False, "error": "Job is not active"}
    pulled = pull(twins, queue)
    assert twins.same({"cmd": "MoveToWaitingChildren", "id": "$0", "token": "bad"})["ok"] is False
    assert twins.same({"cmd": "MoveToWaitingChildren", "id": "$0"})["ok"] is False
    memory = twins.memory.call(
        {"cmd": "MoveToWaitingChildren", "id": pulled[0]["job"]["id"], "token": pulled[0]["token"]})
    postgres = twins.postgres.call(
        {"cmd": "MoveToWaitingChildren", "id": pulled[1]["job"]["id"], "token": pulled[1]["token"]})
    assert memory == postgres == {"ok": True, "data": {"moved": True}}
    # Parked: neither pulled again nor ackable with the old lease.
    assert pull(twins, queue)[1]["job"] is None
    assert twins.same({"cmd": "MoveToWaitingChildren", "id": "nope"}) == {"ok": False, "error": "Job is not active"}


@pytest.mark.parametrize(("policy", "read", "released"), [
    ("ignoreDependencyOnFailure", "GetIgnoredChildrenFailures", True),
    ("continueParentOnFailure", "GetFailedChildrenValues", True),
    ("removeDependencyOnFailure", "GetIgnoredChildrenFailures", True),
    ("failParentOnFailure", "GetFailedChildrenValues", False),
])
def test_a_child_failing_for_good_applies_its_policy(twins: Twins, policy: str, read: str, released: bool) -> None:
    parent, kid, other = _unique("pp"), _unique("pk"), _unique("po")
    parents, children = _unique("pol-p"), _unique("pol-c")
    jobs = graph(parent, parents, [(kid, children)], maxAttempts=1, **{policy: True})
    jobs.append({"id": other, "queue": _unique("pol-o"), "input": {"name": "other", "data": {}}})
    twins.same({"cmd": "PUSHF", "jobs": jobs})
    fail(twins, pull(twins, children), "boom")
    twins.same({"cmd": read, "id": parent})
    twins.same({"cmd": "GetFailedChildrenValues", "id": parent})
    job = pull(twins, parents)[1]["job"]
    assert (job is not None) is released
    if released:
        assert job["id"] == parent


def test_without_a_policy_a_failed_child_keeps_its_parent_waiting(twins: Twins) -> None:
    parent, kid = _unique("np"), _unique("nk")
    parents, children = _unique("nopol-p"), _unique("nopol-c")
    twins.same({"cmd": "PUSHF", "jobs": graph(parent, parents, [(kid, children)], maxAttempts=1)})
    fail(twins, pull(twins, children), "boom")
    assert twins.same({"cmd": "GetFailedChildrenValues", "id": parent}) == {"ok": True, "values": {}}
    assert pull(twins, parents)[1]["job"] is None


@pytest.fixture
def two_brokers(postgres: PostgresServer) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    namespace = f"flows-{uuid.uuid4().hex[:12]}"
    first = postgres_broker(postgres, namespace)
    second = postgres_broker(postgres, namespace)
    yield first, second
    first.stop()
    second.stop()


async def test_an_edge_a_completion_did_not_see_is_released_by_the_sweep(postgres: PostgresServer) -> None:
    """An ACK reads the edges as of its start: an edge committed while it ran is left to the sweep every
    broker runs. Here the dependency is completed behind the ACK statement's back."""
    namespace = f"flows-{uuid.uuid4().hex[:12]}"
    broker = postgres_broker(postgres, namespace)
    client = RawClient(broker.addr)
    conn = await asyncpg.connect(postgres.url())
    try:
        first = client.call({"cmd": "PUSH", "queue": "sweep-a", "data": 1})["id"]
        waiting = client.call({"cmd": "PUSH", "queue": "sweep-b", "data": 2, "dependsOn": [first]})["id"]
        assert client.call({"cmd": "PULL", "queue": "sweep-b", "owner": "w"})["job"] is None
        completed = states.COMPLETED
        await conn.execute(
            "UPDATE bunqueue_jobs SET state = $3 WHERE namespace = $1 AND id = $2", namespace, first, completed)
        job = client.call({"cmd": "PULL", "queue": "sweep-b", "owner": "w", "timeout": 5000})["job"]
        assert job is not None and job["id"] == waiting
    finally:
        await conn.close()
        client.close()
        broker.stop()


def test_children_completed_on_one_broker_release_the_parent_for_another(
    two_brokers: tuple[ServerProcess, ServerProcess],
) -> None:
    a, b = (RawClient(proc.addr) for proc in two_brokers)
    try:
        jobs = graph("tb-parent", "tb-p", [("tb-a", "tb-c"), ("tb-b", "tb-c")])
        assert a.call({"cmd": "PUSHF", "jobs": jobs})["ok"] is True
        assert b.call({"cmd": "PUSHF", "jobs": jobs}) == {"ok": False, "error": "Flow job tb-parent already exists"}
        assert a.call({"cmd": "PULL", "queue": "tb-p", "owner": "w"})["job"] is None
        pulled = b.call({"cmd": "PULLB", "queue": "tb-c", "count": 5, "owner": "w"})
        assert sorted(job["id"] for job in pulled["jobs"]) == ["tb-a", "tb-b"]
        for job, token, result in zip(pulled["jobs"], pulled["tokens"], ("one", "two")):
            assert b.call({"cmd": "ACK", "id": job["id"], "token": token, "result": result}) == {"ok": True}
        parent = a.call({"cmd": "PULL", "queue": "tb-p", "owner": "w", "timeout": 5000})["job"]
        assert parent["id"] == "tb-parent"
        values = {"tb-c:tb-a": "one", "tb-c:tb-b": "two"}
        assert a.call({"cmd": "GetChildrenValues", "id": "tb-parent"}) == {"ok": True, "data": {"values": values}}
    finally:
        a.close()
        b.close()


def test_children_pulled_without_an_owner_are_acked_without_a_token(twins: Twins) -> None:
    parent, kid_a, kid_b = _unique("op"), _unique("oa"), _unique("ob")
    parents, children = _unique("own-p"), _unique("own-c")
    twins.same({"cmd": "PUSHF", "jobs": graph(parent, parents, [(kid_a, children), (kid_b, children)])})
    pulled = twins.same({"cmd": "PULLB", "queue": children, "count": 5})
    assert [job["id"] for job in pulled["jobs"]] == [kid_a, kid_b] and "tokens" not in pulled
    assert twins.same({"cmd": "ACK", "id": kid_a, "result": {"rows": 10}}) == {"ok": True}
    assert twins.same({"cmd": "ACK", "id": kid_a}) == {
        "ok": False, "error": f"Job not found or not in processing state: {kid_a}"}
    assert twins.same({"cmd": "ACKB", "ids": [kid_b], "results": [{"rows": 20}]}) == {"ok": True}
    assert twins.same({"cmd": "GetChildrenValues", "id": parent})["data"]["values"] == {
        f"{children}:{kid_a}": {"rows": 10}, f"{children}:{kid_b}": {"rows": 20}}
    assert pull(twins, parents)[1]["job"]["id"] == parent


def test_a_push_naming_its_parent_joins_it_and_the_parent_waits(twins: Twins) -> None:
    parents, children = _unique("join-p"), _unique("join-c")
    twins.same({"cmd": "PUSH", "queue": parents, "name": "parent", "data": {}})
    link = {"__parentId": "$0", "__parentQueue": parents}
    assert twins.same({"cmd": "PUSH", "queue": children, "data": {**link, "__parentQueue": "elsewhere"},
                       "parentId": "$0"})["ok"] is False
    ghost = {"__parentId": "ghost", "__parentQueue": parents}
    assert twins.same({"cmd": "PUSHB", "queue": children, "jobs": [
        {"data": {}}, {"data": ghost, "parentId": "ghost"}]}) == {
        "ok": False, "error": "jobs[1]: Parent job not found: ghost"}
    assert twins.same({"cmd": "PUSHB", "queue": children, "jobs": [
        {"data": link, "parentId": "$0"}, {"data": link, "parentId": "$0"}]})["ok"] is True
    assert pull(twins, parents)[1]["job"] is None
    ack(twins, pull(twins, children), 1)
    assert pull(twins, parents)[1]["job"] is None
    ack(twins, pull(twins, children), 2)
    job = pull(twins, parents)[1]["job"]
    assert job["id"] == twins.postgres_ids[0] and len(job["childrenIds"]) == 2 == len(job["data"]["__childrenIds"])
    # A running parent takes no new child.
    assert twins.same({"cmd": "PUSH", "queue": children, "data": link, "parentId": "$0"}) == {
        "ok": False, "error": f"Parent job {twins.postgres_ids[0]} is not linkable"}


def test_a_dependant_pushed_while_its_dependency_completes_always_runs(
    two_brokers: tuple[ServerProcess, ServerProcess],
) -> None:
    """The push and the ACK race on two brokers: whichever commits first, the dependant runs (released by
    the ACK, met at push, or released by the sweep)."""
    acker, pusher = (RawClient(proc.addr) for proc in two_brokers)
    try:
        dependants = []
        for _ in range(20):
            first = acker.call({"cmd": "PUSH", "queue": "race-a", "data": 1})["id"]
            token = acker.call({"cmd": "PULL", "queue": "race-a", "owner": "w"})["token"]
            acker.send({"cmd": "ACK", "id": first, "token": token})
            pusher.send({"cmd": "PUSH", "queue": "race-b", "data": 2, "dependsOn": [first]})
            assert acker.recv() == {"ok": True}
            dependants.append(pusher.recv()["id"])
        ran = []
        for _ in dependants:
            job = pusher.call({"cmd": "PULL", "queue": "race-b", "owner": "w", "timeout": 5000})["job"]
            assert job is not None, (len(ran), dependants)
            ran.append(job["id"])
        assert sorted(ran) == sorted(dependants)
    finally:
        acker.close()
        pusher.close()


def test_a_pipelined_push_may_depend_on_the_push_before_it(twins: Twins) -> None:
    queue, first = _unique("dep-pipe"), _unique("dep-first")
    replies = []
    for client in (twins.memory, twins.postgres):
        client.send({"cmd": "PUSH", "queue": queue, "data": 1, "jobId": first})
        client.send({"cmd": "PUSH", "queue": queue, "data": 2, "dependsOn": [first]})
        replies.append([client.recv(), client.recv()])
    assert [reply["ok"] for reply in replies[0]] == [reply["ok"] for reply in replies[1]] == [True, True]
    pulled = pull(twins, queue)
    assert pulled[1]["job"]["id"] == first
    assert pull(twins, queue)[1]["job"] is None
    ack(twins, pulled)
    assert pull(twins, queue)[1]["job"]["id"] == replies[1][1]["id"]


@pytest.mark.parametrize("frame", [
    {"cmd": "GetChildrenValues", "id": [1]},
    {"cmd": "GetChildrenValues"},
    {"cmd": "RemoveUnprocessedChildren", "id": {"a": 1}},
    {"cmd": "UpdateParent", "childId": [1], "parentId": "p"},
    {"cmd": "UpdateParent", "childId": "c", "parentId": 7},
    {"cmd": "RemoveChildDependency", "id": 5},
    {"cmd": "MoveToWaitingChildren", "id": [1], "token": "t"},
    {"cmd": "GetFailedChildrenValues", "id": None},
    {"cmd": "GetIgnoredChildrenFailures"},
    {"cmd": "PUSHF", "jobs": "x"},
    {"cmd": "PUSH", "queue": "dep-odd", "data": 1, "dependsOn": [3]},
])
def test_odd_ids_get_the_memory_engines_answer(twins: Twins, frame: dict[str, Any]) -> None:
    reply = twins.same(frame)
    assert "ok" in reply


def test_pushf_members_take_their_first_states_and_siblings_may_depend_on_each_other(twins: Twins) -> None:
    queue = _unique("flow-mixed")
    first, later, urgent, after = _unique("m1"), _unique("m2"), _unique("m3"), _unique("m4")
    reply = twins.same({"cmd": "PUSHF", "jobs": [
        {"id": first, "queue": queue, "input": {"name": "first", "data": {}}},
        {"id": later, "queue": queue, "input": {"name": "later", "data": {}, "delay": 60000}},
        {"id": urgent, "queue": queue, "input": {"name": "urgent", "data": {}, "priority": 5}},
        {"id": after, "queue": queue, "input": {"name": "after", "data": {}, "dependsOn": [first, urgent]}},
    ]})
    assert [job["id"] for job in reply["data"]["jobs"]] == [first, later, urgent, after]
    taken = [pull(twins, queue) for _ in range(2)]
    assert [pulled[1]["job"]["id"] for pulled in taken] == [urgent, first]
    assert pull(twins, queue)[1]["job"] is None
    for pulled in taken:
        ack(twins, pulled)
    assert pull(twins, queue)[1]["job"]["id"] == after


def test_a_taken_flow_id_is_named_before_a_member_that_does_not_build(twins: Twins) -> None:
    queue, solo = _unique("flow-order"), _unique("solo")
    twins.same({"cmd": "PUSHF", "jobs": [{"id": solo, "queue": queue, "input": {"name": "solo", "data": {}}}]})
    reply = twins.same({"cmd": "PUSHF", "jobs": [
        {"id": _unique("fresh"), "queue": queue, "input": {"name": "x", "data": {}, "priority": "high"}},
        {"id": solo, "queue": queue, "input": {"name": "solo", "data": {}}}]})
    assert reply == {"ok": False, "error": f"Flow job {solo} already exists"}

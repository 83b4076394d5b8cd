"""Flows over a real socket: PUSHF graphs, legacy UpdateParent links, the flow dependency commands and
the four failure policies."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bunqueue.client import Connection


def graph(parent: str, pq: str, kids: list[str], cq: str, **child_opts: Any) -> list[dict[str, Any]]:
    """A parent in ``pq`` with children ``kids`` in ``cq``, as a FlowProducer sends it."""
    jobs = [{
        "id": parent, "queue": pq,
        "input": {"name": "parent", "data": {"__childrenIds": kids}, "childrenIds": kids, "dependsOn": kids},
    }]
    for kid in kids:
        jobs.append({
            "id": kid, "queue": cq,
            "input": {"name": kid, "data": {"__parentId": parent, "__parentQueue": pq}, "parentId": parent,
                      **child_opts},
        })
    return jobs


async def call(conn: Connection, cmd: dict[str, Any]) -> dict[str, Any]:
    reply = await conn.request(cmd)
    reply.pop("reqId", None)
    return reply


async def state(conn: Connection, job_id: str) -> str:
    return (await call(conn, {"cmd": "GetState", "id": job_id}))["state"]


async def run_child(conn: Connection, queue: str, fail: bool = False, result: Any = None) -> str:
    job = (await call(conn, {"cmd": "PULL", "queue": queue}))["job"]
    assert job is not None
    if fail:
        assert (await call(conn, {"cmd": "FAIL", "id": job["id"], "error": "boom"}))["ok"]
    else:
        assert (await call(conn, {"cmd": "ACK", "id": job["id"], "result": result}))["ok"]
    return str(job["id"])


async def test_pushf_publishes_the_graph_and_the_parent_waits(conn: Connection, queue_name: str) -> None:
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    reply = await call(conn, {"cmd": "PUSHF", "jobs": graph("P1", p, ["A1", "B1"], c)})
    assert reply["ok"] is True
    jobs = reply["data"]["jobs"]
    assert [j["id"] for j in jobs] == ["P1", "A1", "B1"]
    assert jobs[0]["timeline"][0]["state"] == "waiting-children"
    assert jobs[0]["childrenIds"] == ["A1", "B1"] and jobs[0]["customId"] is None
    assert jobs[1]["parentId"] == "P1" and jobs[1]["timeline"][0]["state"] == "waiting"
    assert await state(conn, "P1") == "waiting-children"
    counts = (await call(conn, {"cmd": "GetJobCounts", "queue": p}))["counts"]
    assert counts["waiting-children"] == 1 and counts["waiting"] == 0
    assert (await call(conn, {"cmd": "PULL", "queue": p}))["job"] is None
    await run_child(conn, c, result={"rows": 1})
    assert await state(conn, "P1") == "waiting-children"
    await run_child(conn, c, result={"rows": 2})
    assert await state(conn, "P1") == "waiting"
    values = (await call(conn, {"cmd": "GetChildrenValues", "id": "P1"}))["data"]["values"]
    assert values == {f"{c}:A1": {"rows": 1}, f"{c}:B1": {"rows": 2}}
    pulled = (await call(conn, {"cmd": "PULL", "queue": p}))["job"]
    assert pulled["id"] == "P1" and pulled["dependsOn"] == ["A1", "B1"]


async def test_pushf_empty_and_existing_ids(conn: Connection, queue_name: str) -> None:
    assert await call(conn, {"cmd": "PUSHF", "jobs": []}) == {"ok": True, "data": {"jobs": []}}
    solo = [{"id": "S1", "queue": queue_name, "input": {"name": "solo", "data": {"a": 1}, "priority": 3}}]
    first = await call(conn, {"cmd": "PUSHF", "jobs": solo})
    assert first["data"]["jobs"][0]["timeline"][0]["state"] == "prioritized"
    assert await call(conn, {"cmd": "PUSHF", "jobs": solo}) == {"ok": False, "error": "Flow job S1 already exists"}


@pytest.mark.parametrize(
    ("jobs", "error"),
    [
        ("nope", "flow jobs must be an array"),
        ([5], "flow jobs[0] must be an object"),
        ([{"id": 5, "queue": "q", "input": {}}], "flow job id must be a string"),
        ([{"id": "", "queue": "q", "input": {}}], "flow job id is invalid or is not well-formed Unicode"),
        ([{"id": "a:b", "queue": "q", "input": {"name": "x", "data": {}}}], "flow job id cannot contain a colon"),
        ([{"id": "d", "queue": "q", "input": {"name": "x", "data": {}}}] * 2, "duplicate flow job id: d"),
        ([{"id": "q1", "queue": "bad queue", "input": {}}], "invalid flow queue: bad queue"),
        ([{"id": "i", "queue": "q", "input": 3}], "flow job input is invalid: i"),
        ([{"id": "i", "queue": "q", "input": {"name": "x", "data": {}, "customId": "j"}}],
         "custom id does not match planned id: i"),
        ([{"id": "i", "queue": "q", "input": {"name": "x", "data": {}, "dependsOn": [1]}}],
         "dependsOn must be an array of valid string job ids"),
        ([{"id": "e", "queue": "q", "input": {"name": "", "data": {}}}],
         "Job name must be a non-empty string of at most 256 characters"),
        ([{"id": "n", "queue": "q", "input": {"name": "x", "data": 5}}], "flow job data must be an object"),
        ([{"id": "r", "queue": "q", "input": {"name": "x", "data": {}, "repeat": {"every": 5}}}],
         "repeat is not supported inside an atomic flow"),
        ([{"id": "u", "queue": "q", "input": {"name": "x", "data": {}, "uniqueKey": "k"}}],
         "deduplication is not supported inside an atomic flow"),
        ([{"id": "b", "queue": "q", "input": {"name": "x", "data": {}, "debounceId": "k"}}],
         "debounce is not supported inside an atomic flow"),
        ([{"id": "f", "queue": "q", "input": {"name": "x", "data": {}, "failParentOnFailure": True}}],
         "a flow failure policy requires a parent"),
        ([{"id": "f", "queue": "q", "input": {"name": "x", "data": {}, "parentId": "z",
                                              "failParentOnFailure": True, "continueParentOnFailure": True}}],
         "flow failure policies are mutually exclusive"),
        ([{"id": "m", "queue": "q", "input": {"name": "x", "data": {}, "dependsOn": ["ghost"]}}],
         "flow dependency not found: ghost"),
        ([{"id": "s", "queue": "q", "input": {"name": "x", "data": {}, "dependsOn": ["s"]}}],
         "flow job cannot depend on itself: s"),
        ([{"id": "c1", "queue": "q", "input": {"name": "x", "data": {}, "dependsOn": ["c2"]}},
          {"id": "c2", "queue": "q", "input": {"name": "y", "data": {}, "dependsOn": ["c1"]}}],
         "flow contains a dependency cycle"),
        ([{"id": "p1", "queue": "q", "input": {"name": "p", "data": {}, "childrenIds": ["k1"], "dependsOn": ["k1"]}},
          {"id": "k1", "queue": "q", "input": {"name": "k", "data": {}, "parentId": "p1"}}],
         "flow parent p1 children does not match the canonical flow topology"),
        ([{"id": "p1", "queue": "q", "input": {"name": "p", "data": {"__childrenIds": ["k1"]},
                                               "childrenIds": ["k1"], "dependsOn": ["k1"]}},
          {"id": "k1", "queue": "q", "input": {"name": "k", "data": {}, "parentId": "p1"}}],
         "flow child k1 metadata does not match parent p1"),
        ([{"id": "p1", "queue": "q", "input": {"name": "p", "data": {"__childrenIds": ["k1"]},
                                               "childrenIds": ["k1"], "dependsOn": []}},
          {"id": "k1", "queue": "q", "input": {"name": "k", "data": {}, "parentId": "p1"}}],
         "flow child is missing from dependencies: k1"),
        ([{"id": "p1", "queue": "q", "input": {"name": "p", "data": {}}},
          {"id": "k1", "queue": "q", "input": {"name": "k", "data": {}, "parentId": "p1"}}],
         "flow parent p1 does not own child k1"),
        ([{"id": "k1", "queue": "q", "input": {"name": "k", "data": {}, "parentId": "p9"}}],
         "flow parent not found: p9"),
    ],
)
async def test_pushf_validation_publishes_nothing(conn: Connection, jobs: Any, error: str) -> None:
    assert await call(conn, {"cmd": "PUSHF", "jobs": jobs}) == {"ok": False, "error": error}
    counts = (await call(conn, {"cmd": "GetJobCounts", "queue": "q"}))["counts"]
    assert sum(counts.values()) == 0


async def test_pushf_option_rules_are_push_rules(conn: Connection, queue_name: str) -> None:
    bad = [{"id": "t", "queue": queue_name, "input": {"name": "x", "data": {}, "timeout": -1}}]
    reply = await call(conn, {"cmd": "PUSHF", "jobs": bad})
    assert reply["ok"] is False and "timeout" in reply["error"]
    delayed = [{"id": "dl", "queue": queue_name, "input": {"name": "x", "data": {}, "delay": 60000}}]
    assert (await call(conn, {"cmd": "PUSHF", "jobs": delayed}))["data"]["jobs"][0]["timeline"][0][
        "state"] == "delayed"


async def test_push_depending_on_itself(conn: Connection, queue_name: str) -> None:
    reply = await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "x", "data": 1, "jobId": "me",
                              "dependsOn": ["me"]})
    assert reply == {"ok": False, "error": "Job cannot depend on itself: me"}
    batch = await call(conn, {"cmd": "PUSHB", "queue": queue_name, "jobs": [
        {"name": "x", "data": 1, "customId": "me2", "dependsOn": ["me2"]}]})
    assert batch == {"ok": False, "error": "jobs[0]: Job cannot depend on itself: me2"}


async def test_legacy_update_parent(conn: Connection, queue_name: str) -> None:
    p = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "parent", "data": {"p": True}}))["id"]
    c = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "child", "data": {"c": True}}))["id"]
    assert await call(conn, {"cmd": "UpdateParent", "childId": c, "parentId": p}) == {"ok": True}
    parent = (await call(conn, {"cmd": "GetJob", "id": p}))["job"]
    assert parent["state"] == "waiting-children" and parent["childrenIds"] == [c] and parent["dependsOn"] == [c]
    assert parent["data"] == {"p": True, "__childrenIds": [c]}
    child = (await call(conn, {"cmd": "GetJob", "id": c}))["job"]
    assert child["parentId"] == p and child["data"] == {"c": True, "__parentId": p, "__parentQueue": queue_name}
    # Declared already: only the marker is rewritten.
    assert await call(conn, {"cmd": "UpdateParent", "childId": c, "parentId": p}) == {"ok": True}
    assert (await call(conn, {"cmd": "GetJob", "id": p}))["job"]["childrenIds"] == [c]
    errors = [
        ({"childId": c, "parentId": c}, "A flow job cannot be its own parent"),
        ({"childId": "nope", "parentId": p}, "Child job not found: nope"),
        ({"childId": c, "parentId": "nope"}, "Parent job not found: nope"),
    ]
    for args, error in errors:
        assert await call(conn, {"cmd": "UpdateParent", **args}) == {"ok": False, "error": error}
    other = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "other", "data": {}}))["id"]
    assert await call(conn, {"cmd": "UpdateParent", "childId": c, "parentId": other}) == {
        "ok": False, "error": f"Child job {c} already belongs to parent {p}"}
    await run_child(conn, queue_name, result="child-done")
    assert await state(conn, p) == "waiting"
    assert (await call(conn, {"cmd": "GetChildrenValues", "id": p}))["data"]["values"] == {
        f"{queue_name}:{c}": "child-done"}


async def test_update_parent_needs_a_queued_parent(conn: Connection, queue_name: str) -> None:
    p = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "parent", "data": {}}))["id"]
    await call(conn, {"cmd": "PULL", "queue": queue_name})
    c = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "child", "data": {}}))["id"]
    assert await call(conn, {"cmd": "UpdateParent", "childId": c, "parentId": p}) == {
        "ok": False, "error": f"Parent job {p} is not linkable"}


async def test_remove_child_dependency_and_unprocessed_children(conn: Connection, queue_name: str) -> None:
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    assert (await call(conn, {"cmd": "PUSHF", "jobs": graph("RP", p, ["RK1", "RK2"], c)}))["ok"]
    assert await call(conn, {"cmd": "GetFailedChildrenValues", "id": "RP"}) == {"ok": True, "values": {}}
    assert await call(conn, {"cmd": "GetIgnoredChildrenFailures", "id": "RP"}) == {"ok": True, "values": {}}
    assert await call(conn, {"cmd": "RemoveChildDependency", "id": "RK1"}) == {"ok": True, "removed": True}
    kid = (await call(conn, {"cmd": "GetJob", "id": "RK1"}))["job"]
    assert kid["parentId"] is None and kid["data"] == {} and kid["state"] == "waiting"
    parent = (await call(conn, {"cmd": "GetJob", "id": "RP"}))["job"]
    assert parent["childrenIds"] == ["RK2"] and parent["dependsOn"] == ["RK2"]
    assert parent["data"] == {"__childrenIds": ["RK2"]} and parent["state"] == "waiting-children"
    assert await call(conn, {"cmd": "RemoveChildDependency", "id": "RK1"}) == {
        "ok": False, "error": "Job RK1 has no parent"}
    assert await call(conn, {"cmd": "RemoveChildDependency", "id": "nope"}) == {
        "ok": False, "error": "Job not found: nope"}
    assert await call(conn, {"cmd": "RemoveUnprocessedChildren", "id": "RP"}) == {"ok": True}
    assert await state(conn, "RK2") == "unknown"
    assert await state(conn, "RP") == "waiting-children"
    assert (await call(conn, {"cmd": "GetJobCounts", "queue": c}))["counts"]["waiting"] == 1


async def test_removing_the_last_child_releases_the_parent(conn: Connection, queue_name: str) -> None:
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    assert (await call(conn, {"cmd": "PUSHF", "jobs": graph("LP", p, ["LK1", "LK2"], c)}))["ok"]
    await run_child(conn, c, result=1)
    assert (await call(conn, {"cmd": "RemoveChildDependency", "id": "LK2"}))["removed"] is True
    assert await state(conn, "LP") == "waiting"
    assert (await call(conn, {"cmd": "GetJob", "id": "LP"}))["job"]["dependsOn"] == []


async def test_move_to_waiting_children(conn: Connection, queue_name: str) -> None:
    j = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "m", "data": {}}))["id"]
    not_active = {"ok": False, "error": "Job is not active"}
    assert await call(conn, {"cmd": "MoveToWaitingChildren", "id": j}) == not_active
    pulled = await call(conn, {"cmd": "PULL", "queue": queue_name, "owner": "o"})
    assert await call(conn, {"cmd": "MoveToWaitingChildren", "id": j, "token": "bad"}) == {
        "ok": False, "error": f"Invalid or expired lock token for job {j}"}
    assert await call(conn, {"cmd": "MoveToWaitingChildren", "id": j, "token": pulled["token"]}) == {
        "ok": True, "data": {"moved": True}}
    assert await state(conn, j) == "waiting-children"
    counts = (await call(conn, {"cmd": "GetJobCounts", "queue": queue_name}))["counts"]
    assert counts["waiting-children"] == 1 and counts["active"] == 0
    assert await call(conn, {"cmd": "MoveToWaitingChildren", "id": "nope"}) == not_active


async def test_children_values_of_unknown_and_childless_jobs(conn: Connection, queue_name: str) -> None:
    lonely = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "l", "data": 1}))["id"]
    for job_id in (lonely, "no-such-parent"):
        assert await call(conn, {"cmd": "GetChildrenValues", "id": job_id}) == {"ok": True, "data": {"values": {}}}


async def test_no_policy_parent_keeps_waiting(conn: Connection, queue_name: str) -> None:
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    assert (await call(conn, {"cmd": "PUSHF", "jobs": graph("NP", p, ["NK"], c, maxAttempts=1)}))["ok"]
    await run_child(conn, c, fail=True)
    assert await state(conn, "NK") == "failed"
    assert await state(conn, "NP") == "waiting-children"


async def test_fail_parent_on_failure(conn: Connection, queue_name: str) -> None:
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    flow = graph("FP", p, ["FK1", "FK2"], c, maxAttempts=1, failParentOnFailure=True)
    assert (await call(conn, {"cmd": "PUSHF", "jobs": flow}))["ok"]
    await run_child(conn, c, fail=True)
    assert await state(conn, "FP") == "failed"
    dlq = await call(conn, {"cmd": "Dlq", "queue": p})
    assert [job["id"] for job in dlq["jobs"]] == ["FP"]
    assert dlq["entries"][0]["reason"] == "unknown"
    assert dlq["entries"][0]["error"] == "Child job FK1 failed: boom"
    counts = (await call(conn, {"cmd": "GetJobCounts", "queue": p}))["counts"]
    assert counts["failed"] == 1 and counts["waiting-children"] == 0


async def test_fail_parent_only_after_the_last_attempt(conn: Connection, queue_name: str) -> None:
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    flow = graph("RP2", p, ["RK"], c, maxAttempts=2, backoff=0, failParentOnFailure=True)
    assert (await call(conn, {"cmd": "PUSHF", "jobs": flow}))["ok"]
    await run_child(conn, c, fail=True)
    assert await state(conn, "RP2") == "waiting-children"
    await run_child(conn, c, fail=True)
    assert await state(conn, "RP2") == "failed"


async def test_remove_dependency_on_failure(conn: Connection, queue_name: str) -> None:
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    flow = graph("DP", p, ["DK1", "DK2"], c, maxAttempts=1, removeDependencyOnFailure=True)
    assert (await call(conn, {"cmd": "PUSHF", "jobs": flow}))["ok"]
    await run_child(conn, c, fail=True)
    assert await state(conn, "DP") == "waiting-children"
    assert (await call(conn, {"cmd": "GetJob", "id": "DP"}))["job"]["dependsOn"] == ["DK2"]
    await run_child(conn, c, result="ok")
    assert await state(conn, "DP") == "waiting"
    assert (await call(conn, {"cmd": "GetIgnoredChildrenFailures", "id": "DP"}))["values"] == {}


async def test_ignore_dependency_on_failure(conn: Connection, queue_name: str) -> None:
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    flow = graph("IP", p, ["IK"], c, maxAttempts=1, ignoreDependencyOnFailure=True)
    assert (await call(conn, {"cmd": "PUSHF", "jobs": flow}))["ok"]
    await run_child(conn, c, fail=True)
    assert await state(conn, "IP") == "waiting"
    assert await call(conn, {"cmd": "GetIgnoredChildrenFailures", "id": "IP"}) == {
        "ok": True, "values": {f"{c}:IK": "boom"}}
    assert (await call(conn, {"cmd": "GetFailedChildrenValues", "id": "IP"}))["values"] == {}


async def test_continue_parent_on_failure(conn: Connection, queue_name: str) -> None:
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    flow = graph("CP", p, ["CK1", "CK2"], c, maxAttempts=1, continueParentOnFailure=True)
    assert (await call(conn, {"cmd": "PUSHF", "jobs": flow}))["ok"]
    await run_child(conn, c, fail=True)
    assert await state(conn, "CP") == "waiting"
    assert await call(conn, {"cmd": "GetFailedChildrenValues", "id": "CP"}) == {
        "ok": True, "values": {f"{c}:CK1": "boom"}}
    assert (await call(conn, {"cmd": "GetJob", "id": "CP"}))["job"]["dependsOn"] == []


async def test_cancelled_parent_while_children_run(conn: Connection, queue_name: str) -> None:
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    assert (await call(conn, {"cmd": "PUSHF", "jobs": graph("XP", p, ["XK"], c, maxAttempts=1,
                                                              failParentOnFailure=True)}))["ok"]
    job = (await call(conn, {"cmd": "PULL", "queue": c}))["job"]
    assert (await call(conn, {"cmd": "Cancel", "id": "XP"}))["ok"]
    assert (await call(conn, {"cmd": "FAIL", "id": job["id"], "error": "late"}))["ok"]
    assert await state(conn, "XP") == "unknown"
    assert (await call(conn, {"cmd": "GetJobCounts", "queue": p}))["counts"]["failed"] == 0


async def test_three_level_tree(conn: Connection, queue_name: str) -> None:
    q = queue_name
    jobs = [
        {"id": "T0", "queue": q, "input": {"name": "root", "data": {"__childrenIds": ["T1"]},
                                           "childrenIds": ["T1"], "dependsOn": ["T1"]}},
        {"id": "T1", "queue": q, "input": {"name": "mid", "data": {"__childrenIds": ["T2"], "__parentId": "T0",
                                                                    "__parentQueue": q},
                                           "childrenIds": ["T2"], "dependsOn": ["T2"], "parentId": "T0"}},
        {"id": "T2", "queue": q, "input": {"name": "leaf", "data": {"__parentId": "T1", "__parentQueue": q},
                                           "parentId": "T1"}},
    ]
    assert (await call(conn, {"cmd": "PUSHF", "jobs": jobs}))["ok"]
    for expected in ("T2", "T1", "T0"):
        assert await run_child(conn, q, result=expected) == expected
    assert (await call(conn, {"cmd": "GetChildrenValues", "id": "T0"}))["data"]["values"] == {f"{q}:T1": "T1"}


async def test_push_with_a_parent_joins_it(conn: Connection, queue_name: str) -> None:
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    parent = (await call(conn, {"cmd": "PUSH", "queue": p, "name": "parent", "data": {"x": 1}}))["id"]
    meta = {"__parentId": parent, "__parentQueue": p}
    kid = (await call(conn, {"cmd": "PUSH", "queue": c, "name": "kid", "data": {"k": 1, **meta},
                             "parentId": parent}))["id"]
    batch = (await call(conn, {"cmd": "PUSHB", "queue": c, "jobs": [
        {"name": "kid2", "data": {**meta}, "parentId": parent}]}))["ids"]
    view = (await call(conn, {"cmd": "GetJob", "id": parent}))["job"]
    assert view["state"] == "waiting-children" and view["childrenIds"] == [kid, *batch]
    assert view["dependsOn"] == [kid, *batch] and view["data"] == {"x": 1, "__childrenIds": [kid, *batch]}
    await run_child(conn, c, result=1)
    await run_child(conn, c, result=2)
    assert await state(conn, parent) == "waiting"
    # A forward reference is kept for UpdateParent; a named parent must exist in the named queue.
    pending = await call(conn, {"cmd": "PUSH", "queue": c, "name": "k", "parentId": "pending",
                                "data": {"__parentId": "pending", "__parentQueue": p}})
    assert pending["ok"] is True
    refusals = [
        ({"parentId": "ghost", "data": {"__parentId": "ghost", "__parentQueue": p}}, "Parent job not found: ghost"),
        ({"parentId": parent, "data": {"__parentId": parent, "__parentQueue": "elsewhere"}},
         f"Parent job {parent} belongs to queue {p}, not elsewhere"),
        ({"jobId": "self", "parentId": "self", "data": {"__parentId": "self", "__parentQueue": p}},
         "A job cannot be its own parent"),
    ]
    for opts, error in refusals:
        assert await call(conn, {"cmd": "PUSH", "queue": c, "name": "k", **opts}) == {"ok": False, "error": error}
    await call(conn, {"cmd": "PULL", "queue": p})
    assert await call(conn, {"cmd": "PUSH", "queue": c, "name": "k", "parentId": parent, "data": meta}) == {
        "ok": False, "error": f"Parent job {parent} is not linkable"}


async def test_kept_failures_go_when_the_parent_completes(conn: Connection, queue_name: str) -> None:
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    flow = graph("GP", p, ["GK"], c, maxAttempts=1, continueParentOnFailure=True)
    assert (await call(conn, {"cmd": "PUSHF", "jobs": flow}))["ok"]
    await run_child(conn, c, fail=True)
    assert (await call(conn, {"cmd": "GetFailedChildrenValues", "id": "GP"}))["values"] == {f"{c}:GK": "boom"}
    await run_child(conn, p, result="done")
    assert (await call(conn, {"cmd": "GetFailedChildrenValues", "id": "GP"}))["values"] == {}


async def children_values(conn: Connection, parent: str) -> list[tuple[str, Any]]:
    """GetChildrenValues as (key, value) pairs, in the order of the reply."""
    return list((await call(conn, {"cmd": "GetChildrenValues", "id": parent}))["data"]["values"].items())


async def test_removed_children_answer_under_their_bare_id_while_the_parent_waits(
    conn: Connection, queue_name: str
) -> None:
    # As in the reference: a present child under "<queue>:<id>", one gone (removeOnComplete, Obliterate)
    # under its bare id, in the parent's order; a child gone without a result has nothing to answer.
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    parent = f"{queue_name}-BP"
    k1, k2, k3, k4 = (f"{queue_name}-B{i}" for i in range(1, 5))
    flow = graph(parent, p, [k1, k2, k3, k4], c)
    for job in flow[1:]:
        job["input"]["removeOnComplete"] = job["id"] in (k1, k4)
    assert (await call(conn, {"cmd": "PUSHF", "jobs": flow}))["ok"]
    for kid in (k1, k2, k3):
        await run_child(conn, c, result={"v": kid})
    last = (await call(conn, {"cmd": "PULL", "queue": c}))["job"]
    assert last["id"] == k4 and (await call(conn, {"cmd": "ACK", "id": k4}))["ok"]
    assert await children_values(conn, parent) == [(k1, {"v": k1}), (f"{c}:{k2}", {"v": k2}),
                                                   (f"{c}:{k3}", {"v": k3})]
    assert (await call(conn, {"cmd": "GetResult", "id": k1})) == {"ok": True, "id": k1}
    assert (await call(conn, {"cmd": "Obliterate", "queue": c}))["ok"]
    assert await children_values(conn, parent) == [(k1, {"v": k1}), (k2, {"v": k2}), (k3, {"v": k3})]
    # The parent's completion releases them.
    await run_child(conn, p, result="done")
    assert await children_values(conn, parent) == []


async def test_removed_children_results_go_with_the_parent(conn: Connection, queue_name: str) -> None:
    # Kept through a parent's retry; released when it fails for good or is removed.
    c = f"{queue_name}-c"
    failing, cancelled = f"{queue_name}-GFP", f"{queue_name}-GCP"
    for parent in (failing, cancelled):
        flow = graph(parent, parent, [f"{parent}-k"], c, removeOnComplete=True)
        flow[0]["input"]["maxAttempts"] = 2
        flow[0]["input"]["backoff"] = 0
        assert (await call(conn, {"cmd": "PUSHF", "jobs": flow}))["ok"]
        await run_child(conn, c, result=parent)
        assert await children_values(conn, parent) == [(f"{parent}-k", parent)]
    await run_child(conn, failing, fail=True)
    assert await state(conn, failing) == "waiting"
    assert await children_values(conn, failing) == [(f"{failing}-k", failing)]
    await run_child(conn, failing, fail=True)
    assert await state(conn, failing) == "failed"
    assert await children_values(conn, failing) == []
    assert (await call(conn, {"cmd": "Cancel", "id": cancelled}))["ok"]
    assert await children_values(conn, cancelled) == []


HOSTILE = [None, 5, -1.5, True, [], ["a", 1], {}, {"a": [1]}, "x" * 5000, float("nan"), b"\x00\x01"]


@pytest.mark.parametrize("value", HOSTILE, ids=repr)
async def test_flow_commands_answer_hostile_values(conn: Connection, queue_name: str, value: Any) -> None:
    requests = [
        {"cmd": "PUSHF", "jobs": value},
        {"cmd": "PUSHF", "jobs": [value]},
        {"cmd": "PUSHF", "jobs": [{"id": value, "queue": queue_name, "input": {"name": "x", "data": {}}}]},
        {"cmd": "PUSHF", "jobs": [{"id": "h", "queue": value, "input": {"name": "x", "data": {}}}]},
        {"cmd": "PUSHF", "jobs": [{"id": "h", "queue": queue_name, "input": value}]},
        *({"cmd": "PUSHF", "jobs": [{"id": "h", "queue": queue_name, "input": {"name": "x", "data": {}, key: value}}]}
          for key in ("dependsOn", "childrenIds", "parentId", "customId", "priority", "failParentOnFailure",
                      "repeat", "name")),
        {"cmd": "PUSHF", "jobs": [{"id": "h", "queue": queue_name, "input": {"name": "x", "data": {
            "__childrenIds": value}, "childrenIds": ["k"], "dependsOn": ["k"]}},
            {"id": "k", "queue": queue_name, "input": {"name": "x", "data": {"__parentId": value}, "parentId": "h"}}]},
        {"cmd": "UpdateParent", "childId": value, "parentId": value},
        {"cmd": "UpdateParent", "childId": value, "parentId": "p"},
        *({"cmd": cmd, "id": value} for cmd in (
            "GetChildrenValues", "GetFailedChildrenValues", "GetIgnoredChildrenFailures", "RemoveChildDependency",
            "RemoveUnprocessedChildren", "MoveToWaitingChildren")),
        {"cmd": "MoveToWaitingChildren", "id": "nope", "token": value},
    ]
    for request in requests:
        reply = await call(conn, request)
        assert type(reply.get("ok")) is bool, (request, reply)
        assert reply.get("error") != "Internal server error", (request, reply)
    assert (await call(conn, {"cmd": "Ping"}))["ok"] is True
    counts = (await call(conn, {"cmd": "GetJobCounts", "queue": queue_name}))["counts"]
    assert counts["waiting"] + counts["waiting-children"] <= 1


async def test_pushf_group_caps_count_the_graph(conn: Connection, queue_name: str) -> None:
    def member(job_id: str) -> dict[str, Any]:
        return {"id": job_id, "queue": queue_name,
                "input": {"name": "g", "data": {}, "groupId": "G", "groupMaxSize": 2}}

    assert await call(conn, {"cmd": "PUSHF", "jobs": [member("G1"), member("G2"), member("G3")]}) == {
        "ok": False, "error": "Group G has reached its maximum size of 2"}
    assert await state(conn, "G1") == "unknown"
    assert (await call(conn, {"cmd": "PUSHF", "jobs": [member("G1"), member("G2")]}))["ok"] is True


async def test_parent_timeline_records_its_promotion(conn: Connection, queue_name: str) -> None:
    """Children completing out of order: the parent waits until the last, then its timeline gains the
    state it entered (waiting), as the reference's dependency promotion records it."""
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    assert (await call(conn, {"cmd": "PUSHF", "jobs": graph("OP", p, ["OA", "OB", "OC"], c)}))["ok"]
    pulled = await call(conn, {"cmd": "PULLB", "queue": c, "count": 3})
    assert [job["id"] for job in pulled["jobs"]] == ["OA", "OB", "OC"]
    created = (await call(conn, {"cmd": "GetJob", "id": "OP"}))["job"]["createdAt"]
    for kid in ("OC", "OA"):
        assert (await call(conn, {"cmd": "ACK", "id": kid, "result": kid}))["ok"]
        parent = (await call(conn, {"cmd": "GetJob", "id": "OP"}))["job"]
        assert parent["state"] == "waiting-children"
        assert parent["timeline"] == [{"state": "waiting-children", "timestamp": created}]
    assert (await call(conn, {"cmd": "ACK", "id": "OB", "result": "OB"}))["ok"]
    parent = (await call(conn, {"cmd": "GetJob", "id": "OP"}))["job"]
    assert parent["state"] == "waiting" and parent["startedAt"] is None and parent["runAt"] == created
    first, promoted = parent["timeline"]
    assert first == {"state": "waiting-children", "timestamp": created}
    assert promoted["state"] == "waiting" and promoted["timestamp"] >= created and set(promoted) == {
        "state", "timestamp"}
    run = (await call(conn, {"cmd": "PULL", "queue": p}))["job"]
    assert (await call(conn, {"cmd": "ACK", "id": "OP", "result": "done"}))["ok"]
    done = (await call(conn, {"cmd": "GetJob", "id": "OP"}))["job"]
    assert [entry["state"] for entry in done["timeline"]] == ["waiting-children", "waiting", "active", "completed"]
    assert done["timeline"][2]["timestamp"] == run["startedAt"] == done["startedAt"]
    assert done["timeline"][3]["timestamp"] == done["completedAt"]


async def test_promoted_parent_timeline_names_its_state(conn: Connection, queue_name: str) -> None:
    """A prioritized parent enters `prioritized`; a policy release records no entry (as in the reference)."""
    p, c = f"{queue_name}-p", f"{queue_name}-c"
    flow = graph("PP", p, ["PK"], c)
    flow[0]["input"]["priority"] = 4
    assert (await call(conn, {"cmd": "PUSHF", "jobs": flow}))["ok"]
    await run_child(conn, c, result=1)
    timeline = (await call(conn, {"cmd": "GetJob", "id": "PP"}))["job"]["timeline"]
    assert [entry["state"] for entry in timeline] == ["waiting-children", "prioritized"]
    assert (await call(conn, {"cmd": "PUSHF", "jobs": graph("IPP", p, ["IPK"], c, maxAttempts=1,
                                                              ignoreDependencyOnFailure=True)}))["ok"]
    await run_child(conn, c, fail=True)
    released = (await call(conn, {"cmd": "GetJob", "id": "IPP"}))["job"]
    assert released["state"] == "waiting"
    assert [entry["state"] for entry in released["timeline"]] == ["waiting-children"]


@pytest.mark.parametrize(("parent_data", "child_data"), [(5, "s"), ("text", {"c": 1}), ([1, 2], None),
                                                         ({"p": 1}, 7)], ids=repr)
async def test_update_parent_over_non_object_data(conn: Connection, queue_name: str, parent_data: Any,
                                                  child_data: Any) -> None:
    """Non-object data gives way to the flow metadata on both ends, as in the reference."""
    p = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "parent", "data": parent_data}))["id"]
    c = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "child", "data": child_data}))["id"]
    assert await call(conn, {"cmd": "UpdateParent", "childId": c, "parentId": p}) == {"ok": True}
    parent = (await call(conn, {"cmd": "GetJob", "id": p}))["job"]
    kept = parent_data if type(parent_data) is dict else {}
    assert parent["data"] == {**kept, "__childrenIds": [c]}
    assert parent["childrenIds"] == [c] and parent["dependsOn"] == [c] and parent["state"] == "waiting-children"
    child = (await call(conn, {"cmd": "GetJob", "id": c}))["job"]
    kept = child_data if type(child_data) is dict else {}
    assert child["data"] == {**kept, "__parentId": p, "__parentQueue": queue_name}
    assert child["parentId"] == p


async def test_flow_jobs_send_the_job_events_of_any_job(conn: Connection, conn2: Connection,
                                                         queue_name: str) -> None:
    """A flow's members are pushed, pulled and completed with the same events as any job; the names the
    2.7 clients put in ``data.name`` are the jobs' names (the envelope is decoded on the way in)."""
    assert (await conn.request({"cmd": "SubscribeEvents", "queue": queue_name}))["ok"]
    assert (await call(conn2, {"cmd": "PUSHF", "jobs": [
        {"id": "EA", "queue": queue_name, "input": {"name": "alpha", "data": {"step": 0}}}]}))["ok"]
    legacy = await call(conn2, {"cmd": "PUSH", "queue": queue_name, "data": {"name": "beta", "step": 1,
                                                                              "__flowParentId": "EA"},
                                "dependsOn": ["EA"]})
    beta = legacy["id"]
    for expected in ("EA", beta):
        job = (await call(conn2, {"cmd": "PULL", "queue": queue_name}))["job"]
        assert job["id"] == expected
        assert (await call(conn2, {"cmd": "ACK", "id": expected, "result": {"id": expected}}))["ok"]
    got = [(await asyncio.wait_for(conn.events.get(), 3))["event"] for _ in range(6)]
    assert [(event["eventType"], event["jobId"]) for event in got] == [
        ("pushed", "EA"), ("pushed", beta), ("pulled", "EA"), ("completed", "EA"), ("pulled", beta),
        ("completed", beta)]
    assert got[3]["data"] == {"id": "EA"}
    names = [(await call(conn2, {"cmd": "GetJob", "id": job_id}))["job"] for job_id in ("EA", beta)]
    assert [(job["name"], job["data"]) for job in names] == [
        ("alpha", {"step": 0}), ("beta", {"step": 1, "__flowParentId": "EA"})]


async def test_equal_run_times_go_in_admission_order(conn: Connection, queue_name: str) -> None:
    """Siblings admitted together are pulled in request order whatever their ids (the reference compares
    custom ids as strings); a parent a policy releases is queued at its release time, one its children
    complete keeps its creation time."""
    kids = ["k3", "k1", "k2", "K0", "k10"]
    policies = {"k3": {"ignoreDependencyOnFailure": True}, "k1": {"removeDependencyOnFailure": True}}
    jobs = graph("SP", queue_name, kids, queue_name)
    for job in jobs[1:]:
        job["input"].update(maxAttempts=1, **policies.get(job["id"], {}))
    assert (await call(conn, {"cmd": "PUSHF", "jobs": jobs}))["ok"]
    assert (await call(conn, {"cmd": "PUSHF", "jobs": graph("CP2", queue_name, ["c9"], queue_name)}))["ok"]
    assert (await call(conn, {"cmd": "PUSHF", "jobs": graph("RP3", queue_name, ["r9"], queue_name, maxAttempts=1,
                                                             ignoreDependencyOnFailure=True)}))["ok"]
    pulled = await call(conn, {"cmd": "PULLB", "queue": queue_name, "count": 10})
    assert [job["id"] for job in pulled["jobs"]] == [*kids, "c9", "r9"]
    for kid in ("k1", "k3"):
        assert (await call(conn, {"cmd": "FAIL", "id": kid, "error": "boom"}))["ok"]
    for kid in ("k2", "K0"):
        assert (await call(conn, {"cmd": "ACK", "id": kid, "result": kid}))["ok"]
    late = (await call(conn, {"cmd": "PUSH", "queue": queue_name, "name": "late", "data": {}}))["id"]
    assert (await call(conn, {"cmd": "ACK", "id": "k10", "result": "k10"}))["ok"]
    assert (await call(conn, {"cmd": "ACK", "id": "c9", "result": "c9"}))["ok"]
    late_at = (await call(conn, {"cmd": "GetJob", "id": late}))["job"]["runAt"]
    await asyncio.sleep(0.005)  # the release falls in a later millisecond than the late push
    assert (await call(conn, {"cmd": "FAIL", "id": "r9", "error": "boom"}))["ok"]
    sp, cp, rp = [(await call(conn, {"cmd": "GetJob", "id": job_id}))["job"] for job_id in ("SP", "CP2", "RP3")]
    assert cp["runAt"] == cp["createdAt"] and sp["runAt"] == sp["createdAt"]
    assert rp["runAt"] > late_at and rp["state"] == "waiting"
    pulled = await call(conn, {"cmd": "PULLB", "queue": queue_name, "count": 10})
    assert [job["id"] for job in pulled["jobs"]] == ["SP", "CP2", late, "RP3"]
    assert await call(conn, {"cmd": "GetIgnoredChildrenFailures", "id": "SP"}) == {
        "ok": True, "values": {f"{queue_name}:k3": "boom"}}

"""A model test of flow parents: random graphs (each child with a random failure policy) whose children
complete or fail in a random order, against a plain model of what the parent's state, dependencies and
failure records must be after every step."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from inprocess import World

POLICIES = (None, "failParentOnFailure", "removeDependencyOnFailure", "ignoreDependencyOnFailure",
            "continueParentOnFailure")
PARENT_Q = "fp"
CHILD_Q = "fc"


@dataclass
class ParentModel:
    children: list[str]
    state: str = "waiting-children"
    depends_on: list[str] = field(default_factory=list)
    pending: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    ignored: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.depends_on = list(self.children)
        self.pending = set(self.children)

    def completed(self, child: str) -> None:
        self.pending.discard(child)
        if self.state == "waiting-children" and not self.pending:
            self.state = "waiting"

    def failed_child(self, child: str, policy: str | None, error: str) -> None:
        if self.state not in ("waiting-children", "waiting") or policy is None:
            return
        key = f"{CHILD_Q}:{child}"
        if policy == "failParentOnFailure":
            self.state = "failed"
        elif policy == "continueParentOnFailure":
            self.failed[key] = error
            self.depends_on = []
            self.pending.clear()
            self.state = "waiting"
        else:
            if policy == "ignoreDependencyOnFailure":
                self.ignored[key] = error
            if self.state == "waiting-children" and child in self.depends_on:
                self.depends_on.remove(child)
                self.pending.discard(child)
                if not self.pending:
                    self.state = "waiting"


def flow(children: list[tuple[str, str | None]]) -> list[dict[str, Any]]:
    ids = [kid for kid, _ in children]
    jobs = [{"id": "parent", "queue": PARENT_Q, "input": {
        "name": "parent", "data": {"__childrenIds": ids}, "childrenIds": ids, "dependsOn": ids}}]
    for kid, policy in children:
        opts: dict[str, Any] = {"name": kid, "data": {"__parentId": "parent", "__parentQueue": PARENT_Q},
                                "parentId": "parent", "maxAttempts": 1}
        if policy is not None:
            opts[policy] = True
        jobs.append({"id": kid, "queue": CHILD_Q, "input": opts})
    return jobs


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[tuple[str, str | None]], list[tuple[str, bool]]]:
    n = draw(st.integers(1, 6))
    children = [(f"k{i}", draw(st.sampled_from(POLICIES))) for i in range(n)]
    order = draw(st.permutations([kid for kid, _ in children]))
    outcomes = [(kid, draw(st.booleans())) for kid in order]
    return children, outcomes


@settings(max_examples=300, deadline=None)
@given(scenarios())
def test_parent_follows_the_model(scenario: tuple[list[tuple[str, str | None]], list[tuple[str, bool]]]) -> None:
    children, outcomes = scenario
    world = World()
    send = world.send
    assert send({"cmd": "PUSHF", "jobs": flow(children)})["ok"]
    policies = dict(children)
    model = ParentModel([kid for kid, _ in children])
    pulled = send({"cmd": "PULLB", "queue": CHILD_Q, "count": len(children)})["jobs"]
    assert sorted(job.id for job in pulled) == sorted(policies)
    for kid, succeeds in outcomes:
        if succeeds:
            assert send({"cmd": "ACK", "id": kid, "result": kid})["ok"]
            model.completed(kid)
        else:
            assert send({"cmd": "FAIL", "id": kid, "error": f"err-{kid}"})["ok"]
            model.failed_child(kid, policies[kid], f"err-{kid}")
        check(world, model)
    done = {f"{CHILD_Q}:{kid}": kid for kid, ok in outcomes if ok}
    assert send({"cmd": "GetChildrenValues", "id": "parent"})["data"]["values"] == done


def check(world: World, model: ParentModel) -> None:
    send = world.send
    assert send({"cmd": "GetState", "id": "parent"})["state"] == model.state
    counts = send({"cmd": "GetJobCounts", "queue": PARENT_Q})["counts"]
    assert counts["waiting-children"] == (model.state == "waiting-children")
    assert counts["waiting"] == (model.state == "waiting")
    assert counts["failed"] == (model.state == "failed")
    parent = world.broker.jobs["parent"]
    if model.state != "failed":
        assert list(parent.depends_on) == model.depends_on
    assert send({"cmd": "GetFailedChildrenValues", "id": "parent"})["values"] == (
        model.failed if model.state != "failed" else {})
    assert send({"cmd": "GetIgnoredChildrenFailures", "id": "parent"})["values"] == (
        model.ignored if model.state != "failed" else {})
    # Nothing waits on a parent that no longer waits: the reverse index holds only live edges.
    waiting_on = {dep for dep, ids in world.broker.deps.dependents.items() if "parent" in ids}
    assert waiting_on == (model.pending if model.state == "waiting-children" else set())

"""A model test of flow parents: random graphs (each child with a random failure policy) whose children
complete or fail in a random order, against a plain model of what the parent's state, dependencies and
failure records must be after every step."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue._testbase.inprocess import World

POLICIES = (None, "failParentOnFailure", "removeDependencyOnFailure", "ignoreDependencyOnFailure",
            "continueParentOnFailure")
PARENT_Q = "fp"
CHILD_Q = "fc"


@dataclass
class NodeModel:
    """One job of a random tree: its state, and as a parent what it waits for and what it kept."""

    kids: list[str]
    state: str = "waiting"
    depends_on: list[str] = field(default_factory=list)
    pending: set[str] = field(default_factory=set)
    failed: dict[str, str] = field(default_factory=dict)
    ignored: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.depends_on = list(self.kids)
        self.pending = set(self.kids)
        if self.kids:
            self.state = "waiting-children"

    def finished(self, state: str) -> None:
        self.state = state
        self.failed, self.ignored = {}, {}

    def completed_child(self, child: str) -> None:
        self.pending.discard(child)
        if self.state == "waiting-children" and not self.pending:
            self.state = "waiting"

    def failed_child(self, child: str, key: str, policy: str | None, error: str) -> None:
        """What the child's policy does to this parent while it is queued or waiting."""
        if self.state not in ("waiting-children", "waiting") or policy is None:
            return
        if policy == "failParentOnFailure":
            self.finished("failed")
        elif policy == "continueParentOnFailure":
            self.failed[key] = error
            self.depends_on, self.pending = [], set()
            self.state = "waiting"
        else:
            if policy == "ignoreDependencyOnFailure":
                self.ignored[key] = error
            if self.state == "waiting-children" and child in self.depends_on:
                self.depends_on.remove(child)
                self.completed_child(child)


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
    model = NodeModel([kid for kid, _ in children])
    pulled = send({"cmd": "PULLB", "queue": CHILD_Q, "count": len(children)})["jobs"]
    assert sorted(job.id for job in pulled) == sorted(policies)
    for kid, succeeds in outcomes:
        if succeeds:
            assert send({"cmd": "ACK", "id": kid, "result": kid})["ok"]
            model.completed_child(kid)
        else:
            assert send({"cmd": "FAIL", "id": kid, "error": f"err-{kid}"})["ok"]
            model.failed_child(kid, f"{CHILD_Q}:{kid}", policies[kid], f"err-{kid}")
        check(world, model)
    done = {f"{CHILD_Q}:{kid}": kid for kid, ok in outcomes if ok}
    assert send({"cmd": "GetChildrenValues", "id": "parent"})["data"]["values"] == done


def check(world: World, model: NodeModel) -> None:
    send = world.send
    assert send({"cmd": "GetState", "id": "parent"})["state"] == model.state
    counts = send({"cmd": "GetJobCounts", "queue": PARENT_Q})["counts"]
    assert counts["waiting-children"] == (model.state == "waiting-children")
    assert counts["waiting"] == (model.state == "waiting")
    assert counts["failed"] == (model.state == "failed")
    parent = world.broker.jobs["parent"]
    if model.state != "failed":
        assert list(parent.depends_on) == model.depends_on
    assert send({"cmd": "GetFailedChildrenValues", "id": "parent"})["values"] == model.failed
    assert send({"cmd": "GetIgnoredChildrenFailures", "id": "parent"})["values"] == model.ignored
    # Nothing waits on a parent that no longer waits: the reverse index holds only live edges.
    waiting_on = {dep for dep, ids in world.broker.deps.dependents.items() if "parent" in ids}
    assert waiting_on == (model.pending if model.state == "waiting-children" else set())


@st.composite
def trees(draw: st.DrawFn) -> tuple[list[int | None], list[str | None]]:
    """Node i > 0 hangs under an earlier node; every child has a policy (or none)."""
    n = draw(st.integers(2, 8))
    parents: list[int | None] = [None] + [draw(st.integers(0, i - 1)) for i in range(1, n)]
    policies = [None] + [draw(st.sampled_from(POLICIES)) for _ in range(1, n)]
    return parents, policies


def tree_flow(parents: list[int | None], policies: list[str | None]) -> list[dict[str, Any]]:
    jobs = []
    for i, parent in enumerate(parents):
        kids = [f"n{j}" for j, p in enumerate(parents) if p == i]
        data: dict[str, Any] = {}
        opts: dict[str, Any] = {"name": f"n{i}", "maxAttempts": 1}
        if kids:
            data["__childrenIds"] = kids
            opts.update(childrenIds=kids, dependsOn=kids)
        if parent is not None:
            data.update(__parentId=f"n{parent}", __parentQueue=f"q{parent}")
            opts["parentId"] = f"n{parent}"
            if policies[i] is not None:
                opts[policies[i]] = True
        jobs.append({"id": f"n{i}", "queue": f"q{i}", "input": {**opts, "data": data}})
    return jobs


@settings(max_examples=200, deadline=None)
@given(trees(), st.data())
def test_random_trees_follow_the_model(tree: tuple[list[int | None], list[str | None]], data: st.DataObject) -> None:
    parents, policies = tree
    world = World()
    send = world.send
    assert send({"cmd": "PUSHF", "jobs": tree_flow(parents, policies)})["ok"]
    nodes = {f"n{i}": NodeModel([f"n{j}" for j, p in enumerate(parents) if p == i]) for i in range(len(parents))}
    while ready := sorted(name for name, node in nodes.items() if node.state == "waiting"):
        name = data.draw(st.sampled_from(ready))
        i = int(name[1:])
        assert send({"cmd": "PULL", "queue": f"q{i}"})["job"].id == name
        parent = nodes.get(f"n{parents[i]}") if parents[i] is not None else None
        if data.draw(st.booleans()):
            assert send({"cmd": "ACK", "id": name, "result": name})["ok"]
            nodes[name].finished("completed")
            if parent is not None:
                parent.completed_child(name)
        else:
            assert send({"cmd": "FAIL", "id": name, "error": f"err-{name}"})["ok"]
            nodes[name].finished("failed")
            if parent is not None:
                parent.failed_child(name, f"q{i}:{name}", policies[i], f"err-{name}")
        for job_id, node in nodes.items():
            assert send({"cmd": "GetState", "id": job_id})["state"] == node.state, (job_id, nodes)
            assert send({"cmd": "GetFailedChildrenValues", "id": job_id})["values"] == node.failed
            assert send({"cmd": "GetIgnoredChildrenFailures", "id": job_id})["values"] == node.ignored
            if node.state == "waiting-children":
                assert list(world.broker.jobs[job_id].depends_on) == node.depends_on

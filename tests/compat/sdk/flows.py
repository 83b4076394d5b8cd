"""FlowProducer (legacy PUSH + UpdateParent flows): add, add_bulk_then and a three-level tree; children run
before their parent, and a parent reads its children's results."""
from __future__ import annotations

import os
import sys
import threading
from typing import Any

from scenario import broker, queue_name, wait_until

from bunqueue import CommandError, FlowProducer, Job, Queue, Worker

parents = Queue(queue_name("flow-p"), **broker())
kids = Queue(queue_name("flow-c"), **broker())
flow = FlowProducer(**broker())

if os.environ["COMPAT_SERVER"] == "bun":
    # The SDK pushes children with a temporary parent marker ('pending') and links them with UpdateParent.
    # The Bun original 2.9.5 refuses that marker; the specification keeps this legacy composition, as we do.
    try:
        flow.add({"name": "p", "queueName": parents.name, "data": {"label": "p"},
                  "children": [{"name": "k", "queueName": kids.name, "data": {"label": "k"}}]})
    except CommandError as exc:
        assert str(exc) == "Parent job not found: pending", exc
    else:
        raise AssertionError("the original accepted a legacy flow")
    flow.close()
    print("ok")
    sys.exit(0)
lock = threading.Lock()
ran: list[str] = []
values: dict[str, dict[str, Any]] = {}


def process(job: Job) -> dict[str, str]:
    label = job.data["label"]
    with lock:
        ran.append(label)
    if job.data.get("reads_children"):
        values[label] = job.get_children_values()
    return {"from": label}


workers = [Worker(q.name, process, concurrency=4, poll_timeout_ms=200, **broker()) for q in (parents, kids)]

# add: a parent in one queue, two children in another.
node = flow.add({
    "name": "report", "queueName": parents.name, "data": {"label": "report", "reads_children": True},
    "children": [
        {"name": "part", "queueName": kids.name, "data": {"label": "part-a"}},
        {"name": "part", "queueName": kids.name, "data": {"label": "part-b"}},
    ],
})
a, b = (child.job.id for child in node.children)
wait_until("the report completed", lambda: parents.get_state(node.job.id) == "completed")
assert values["report"] == {f"{kids.name}:{a}": {"from": "part-a"}, f"{kids.name}:{b}": {"from": "part-b"}}, values
assert ran.index("report") > max(ran.index("part-a"), ran.index("part-b")), ran

# add_bulk_then: three independent jobs converge on a final one.
fan = flow.add_bulk_then(
    [{"name": "shard", "queueName": kids.name, "data": {"label": f"shard-{i}"}} for i in range(3)],
    {"name": "merge", "queueName": parents.name, "data": {"label": "merge", "reads_children": True}},
)
wait_until("the merge completed", lambda: parents.get_state(fan["final_id"]) == "completed")
assert sorted(v["from"] for v in values["merge"].values()) == ["shard-0", "shard-1", "shard-2"], values
assert ran.index("merge") > max(ran.index(f"shard-{i}") for i in range(3)), ran

# A three-level tree: leaf, then middle, then root.
tree = flow.add({
    "name": "root", "queueName": parents.name, "data": {"label": "root", "reads_children": True},
    "children": [{
        "name": "mid", "queueName": kids.name, "data": {"label": "mid"},
        "children": [{"name": "leaf", "queueName": kids.name, "data": {"label": "leaf"}}],
    }],
})
wait_until("the root completed", lambda: parents.get_state(tree.job.id) == "completed")
assert ran.index("leaf") < ran.index("mid") < ran.index("root"), ran
mid_id = tree.children[0].job.id
assert values["root"] == {f"{kids.name}:{mid_id}": {"from": "mid"}}, values
got = flow.get_flow(tree.job.id)
assert got is not None and [child.job.id for child in got.children] == [mid_id]
assert [leaf.job.id for leaf in got.children[0].children] == [tree.children[0].children[0].job.id]

for worker in workers:
    assert worker.close(timeout=15)
flow.close()
print("ok")

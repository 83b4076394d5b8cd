"""Flow tools: trees, chains and fan-out/fan-in of jobs (committed as one PUSHF), and reading a tree back."""
from __future__ import annotations

from typing import Any

from bunqueue import errors
from bunqueue.asyncio.flow import FlowNode, FlowProducer
from bunqueue.mcp import shapes
from bunqueue.mcp.adapter import Adapter, ToolFailure
from bunqueue.mcp.schema import Schema, Tool, array, number, obj, record, recursive, string

OPTION_NAMES = ("priority", "delay", "attempts")
JOB_OPTS = obj({
    "priority": number("Priority (higher = processed first)"),
    "delay": number("Delay in ms before processing"),
    "attempts": number("Max retry attempts"),
}, description="Optional job settings")
DEFAULT_FLOW_DEPTH = 10


def _step_schema() -> Schema:
    return obj({
        "name": string("Job name/type"),
        "queueName": string("Queue to run in"),
        "data": record("Job payload data"),
        "opts": JOB_OPTS,
    }, ("name", "queueName", "data"))


FLOW_JOB = obj({
    "name": string("Job name/type"),
    "queueName": string("Queue to run in"),
    "data": record("Job payload data"),
    "opts": JOB_OPTS,
    "children": recursive("Child jobs (processed BEFORE parent)"),
}, ("name", "queueName"))


def _flow_input(node: dict[str, Any]) -> dict[str, Any]:
    """A flow node as the producer takes it: only the options the tools publish."""
    opts = {key: value for key, value in (node.get("opts") or {}).items() if key in OPTION_NAMES}
    return shapes.defined(name=node["name"], queueName=node["queueName"], data=node.get("data"), opts=opts or None,
                          children=[_flow_input(child) for child in node.get("children") or []] or None)


def _node(node: FlowNode) -> dict[str, Any]:
    shape: dict[str, Any] = {"jobId": node.job.id, "name": node.job.name, "queueName": node.job.queue}
    if node.children:
        shape["children"] = [_node(child) for child in node.children]
    return shape


async def _read_flow(adapter: Adapter, job_id: str, queue: str | None, depth: float, max_children: float | None,
                     seen: set[str]) -> dict[str, Any] | None:
    """The tree under ``job_id`` (which must be in ``queue`` when one is given), or None."""
    reply = await adapter.send({"cmd": "GetJob", "id": job_id})
    raw = reply.get("job") if reply.get("ok") else None
    if not raw or (queue is not None and raw.get("queue") != queue) or job_id in seen:
        return None
    seen.add(job_id)
    shape: dict[str, Any] = {"jobId": str(raw["id"]), "name": raw.get("name"), "queueName": raw.get("queue")}
    child_ids = [str(child) for child in raw.get("childrenIds") or []]
    if max_children is not None:
        child_ids = child_ids[: max(0, int(max_children))]
    if depth > 0 and child_ids:
        children = [await _read_flow(adapter, child, None, depth - 1, max_children, seen) for child in child_ids]
        if any(children):
            shape["children"] = [child for child in children if child is not None]
    return shape


def tools(adapter: Adapter) -> list[Tool]:
    producer = FlowProducer(connection=adapter.transport)

    async def add_flow(a: dict[str, Any]) -> str:
        return shapes.text(_node(await producer.add(_flow_input(a))), pretty=True)

    async def add_flow_chain(a: dict[str, Any]) -> str:
        ids = await producer.add_chain([_flow_input(step) for step in a["steps"]])
        return shapes.text({"jobIds": ids}, pretty=True)

    async def add_flow_bulk_then(a: dict[str, Any]) -> str:
        planned = await producer.add_bulk_then([_flow_input(step) for step in a["parallel"]], _flow_input(a["final"]))
        return shapes.text({"parallelIds": planned["parallel_ids"], "finalId": planned["final_id"]}, pretty=True)

    async def get_flow(a: dict[str, Any]) -> str:
        depth: float = a["depth"] if a.get("depth") is not None else DEFAULT_FLOW_DEPTH
        found = await _read_flow(adapter, a["jobId"], a["queueName"], depth, a.get("maxChildren"), set())
        if found is None:
            raise ToolFailure(errors.MCP_FLOW_NOT_FOUND)
        return shapes.text(found, pretty=True)

    step = _step_schema()
    return [
        Tool("bunqueue_add_flow",
             "Create a job flow tree (BullMQ v5 compatible). Children are processed BEFORE their parent. "
             "Use for complex dependency graphs.", {
                 "name": string("Root job name/type"),
                 "queueName": string("Root queue name"),
                 "data": record("Root job payload"),
                 "opts": JOB_OPTS,
                 "children": recursive("Child jobs (processed BEFORE this job)"),
             }, ("name", "queueName"), add_flow, definition=FLOW_JOB),
        Tool("bunqueue_add_flow_chain",
             "Create a sequential job pipeline: step[0] → step[1] → step[2]. "
             "Each step depends on the previous one completing first.",
             {"steps": array(step, "Steps executed in order, each depending on the previous", min_items=1)},
             ("steps",), add_flow_chain),
        Tool("bunqueue_add_flow_bulk_then",
             "Fan-out/fan-in: run parallel jobs, then execute a final job when ALL parallel jobs complete.", {
                 "parallel": array(step, "Jobs that run in parallel", min_items=1),
                 "final": {**step, "description": "Final job that runs after all parallel jobs complete"},
             }, ("parallel", "final"), add_flow_bulk_then),
        Tool("bunqueue_get_flow",
             "Retrieve a flow tree starting from a job. Shows the full dependency graph with children.", {
                 "jobId": string("Job ID to get flow tree for"),
                 "queueName": string("Queue name where the job is located"),
                 "depth": number("Max traversal depth (default: 10)"),
                 "maxChildren": number("Max children per level"),
             }, ("jobId", "queueName"), get_flow),
    ]

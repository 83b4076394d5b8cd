"""FlowProducer: trees of jobs where a parent runs after its children, committed in one ``PUSHF``.

The whole graph is planned here (final ids, parent and children edges, options) and sent as one command:
the server publishes all of it or none of it.
"""
from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from bunqueue.asyncio.base import TransportUser
from bunqueue.asyncio.job import Job
from bunqueue.client.connectionoptions import DEFAULT_PORT, ConnectionOptions, TlsOption
from bunqueue.client.options import compact, job_fields
from bunqueue.client.transport import Transport
from bunqueue.errors import RemoteCommandError

MAX_FLOW_DEPTH = 100


class FlowNode:
    """A job of a flow and the nodes of its children."""

    def __init__(self, job: Any, children: list[FlowNode] | None = None) -> None:
        self.job = job
        self.children = children or []

    def __repr__(self) -> str:
        return f"FlowNode({self.job!r}, children={len(self.children)})"


class _Plan:
    """The PUSHF members of some flow trees, children before their parent."""

    def __init__(self, queues_options: dict[str, dict[str, Any]] | None = None) -> None:
        self.members: list[dict[str, Any]] = []
        self.queues_options = queues_options or {}

    def visit(self, node: dict[str, Any], parent: tuple[str, str] | None = None, depth: int = 0) -> dict[str, Any]:
        """Plan ``node`` and its subtree; the planned tree mirrors the given one with ids."""
        if depth > MAX_FLOW_DEPTH:
            raise ValueError(f"a flow is at most {MAX_FLOW_DEPTH} levels deep")
        if not isinstance(node.get("name"), str) or not isinstance(node.get("queueName"), str):
            raise ValueError("every flow node needs a name and a queueName")
        data = node.get("data")
        if data is not None and not isinstance(data, dict):
            raise ValueError("flow job data must be a dict")
        queue = node["queueName"]
        opts = {**self.queues_options.get(queue, {}), **(node.get("opts") or {})}
        job_id = opts.pop("job_id", None) or str(uuid.uuid4())
        if ":" in job_id:
            raise ValueError("a flow job id cannot contain a colon")
        children = [self.visit(child, (job_id, queue), depth + 1) for child in node.get("children") or []]
        child_ids = [child["id"] for child in children]
        internal = dict(data or {})
        if parent is not None:
            internal["__parentId"], internal["__parentQueue"] = parent
        if child_ids:
            internal["__childrenIds"] = child_ids
        fields = job_fields(opts)
        fields.pop("jobId", None)
        edges = compact({"parentId": parent[0] if parent else None, "dependsOn": child_ids or None,
                         "childrenIds": child_ids or None})
        self.members.append({"id": job_id, "queue": queue,
                             "input": {"name": node["name"], "data": internal, **fields, **edges}})
        return {"id": job_id, "children": children}


class FlowProducer(TransportUser):
    """Adds flows to any queues; ``async with FlowProducer(...) as flow`` closes it."""

    def __init__(
        self,
        host: str = "localhost",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        tls: TlsOption = None,
        connection: Transport | None = None,
        on_telemetry: Callable[[dict[str, Any]], None] | None = None,
        *,
        embedded: bool = False,
        data_path: str | None = None,
    ) -> None:
        self._open(ConnectionOptions(
            host, port, token, tls, on_telemetry=on_telemetry, embedded=embedded, data_path=data_path,
        ), connection)

    def _job(self, raw: dict[str, Any]) -> Any:
        return Job(raw, self.transport)

    async def _commit(self, plan: _Plan, trees: list[dict[str, Any]]) -> list[FlowNode]:
        reply = await self.transport.call({"cmd": "PUSHF", "jobs": plan.members})
        data = reply.get("data")
        committed = {str(raw.get("id")): raw for raw in (data.get("jobs") if isinstance(data, dict) else None) or []}
        members = {m["id"]: m for m in plan.members}

        def node(tree: dict[str, Any]) -> FlowNode:
            member = members[tree["id"]]
            raw = committed.get(tree["id"]) or {"id": tree["id"], "queue": member["queue"], **member["input"]}
            return FlowNode(self._job(raw), [node(child) for child in tree["children"]])

        return [node(tree) for tree in trees]

    async def add(self, flow: dict[str, Any], opts: dict[str, Any] | None = None) -> FlowNode:
        """Add one tree ``{"name", "queueName", "data", "opts", "children": [...]}``; ``opts`` may hold
        ``queues_options`` (default job options per queue)."""
        plan = _Plan((opts or {}).get("queues_options"))
        tree = plan.visit(flow)
        return (await self._commit(plan, [tree]))[0]

    async def add_bulk(self, flows: Sequence[dict[str, Any]]) -> list[FlowNode]:
        """Add several trees in one command: all of them or none."""
        plan = _Plan()
        trees = [plan.visit(flow) for flow in flows]
        return await self._commit(plan, trees)

    async def add_chain(self, steps: Sequence[dict[str, Any]]) -> list[str]:
        """Jobs that run one after the other: each step waits for the one before. Ids in step order."""
        if not steps:
            return []
        # A chain is a tree where each step is the parent of the one before it.
        tree: dict[str, Any] | None = None
        for step in steps:
            tree = {**step, "children": [tree] if tree is not None else []}
        assert tree is not None
        node = await self.add(tree)
        ids: list[str] = []
        current: FlowNode | None = node
        while current is not None:
            ids.append(current.job.id)
            current = current.children[0] if current.children else None
        return ids[::-1]

    async def add_bulk_then(self, parallel: Sequence[dict[str, Any]], final: dict[str, Any]) -> dict[str, Any]:
        """Independent jobs and one final job that runs after all of them and reads their results with
        ``get_children_values``: ``{"parallel_ids": [...], "final_id": id}``."""
        node = await self.add({**final, "children": list(parallel)})
        return {"parallel_ids": [child.job.id for child in node.children], "final_id": node.job.id}

    async def get_flow(self, job_id: str, depth: int | None = None) -> FlowNode | None:
        """The tree under ``job_id`` as it is now (removed jobs left out); ``depth`` bounds it."""
        return await self._get_flow(job_id, depth, set())

    async def _get_flow(self, job_id: str, depth: int | None, seen: set[str]) -> FlowNode | None:
        if job_id in seen:
            return None
        seen.add(job_id)
        try:
            reply = await self.transport.call({"cmd": "GetJob", "id": job_id})
        except RemoteCommandError as exc:
            if "not found" in str(exc).lower():
                return None
            raise
        raw = reply.get("job")
        if not raw:
            return None
        job = self._job(raw)
        children: list[FlowNode] = []
        if depth is None or depth > 0:
            for child_id in job.children_ids:
                child = await self._get_flow(child_id, None if depth is None else depth - 1, seen)
                if child is not None:
                    children.append(child)
        return FlowNode(job, children)

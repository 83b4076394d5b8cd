"""HTTP answers that are not one command's reply: probes, summaries, pages and reshaped replies.

Each is composed from ordinary commands through the same executor as every route, so no job rule is
written here; only the shape of the answer is. Monitoring answers (`/stats`, `/metrics`, dashboards,
`/prometheus`) come from the monitoring commands; health and readiness from counts and the engine's storage
status, read directly (the figures StorageStatus answers): a probe is no client's command, and probes come
often.
"""
from __future__ import annotations

import gc
import math
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from bunqueue import __version__
from bunqueue.monitoring.snapshot import Totals, process_memory
from bunqueue.server.http.encoding import json_bytes

Executor = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Doc = dict[str, Any]
# The engine's StorageStatus data: at once (memory, SQLite) or after a round trip (PostgreSQL).
StorageStatus = Callable[[], Doc | Awaitable[Doc]]
Query = Mapping[str, str]
MB = 1024 * 1024
DASHBOARD_LIMIT_MAX = 500
DASHBOARD_LIMIT_DEFAULT = 100
DASHBOARD_LIST_MAX = 100
# How long /health reuses its memory reading: probes may come many times a second.
HEALTH_MEMORY_TTL_S = 1.0
# health_of's document for a healthy broker, written with its figures filled in rather than built and
# encoded for every probe (a model test holds the two to the same bytes).
HEALTHY_BODY = ('{"ok":true,"status":"healthy","uptime":%d,"version":' + json_bytes(__version__).decode()
                + ',"queues":{"waiting":%d,"active":%d,"delayed":%d,"completed":%d,"dlq":%d},'
                '"connections":{"tcp":%d,"ws":%d,"sse":%d},"memory":%s}').encode()


def memory_mb() -> dict[str, float]:
    """Resident size and the heap in use / reserved, in MB, as the original reports them."""
    mem = process_memory()
    return {"heapUsed": round(mem.heap_used / MB, 2), "heapTotal": round(mem.heap_total / MB, 2),
            "rss": round(mem.rss / MB, 2)}


def _int_query(query: Query, name: str) -> int | float | None:
    """A whole-number query parameter; past 2^53 a float, as the JS number it is (and as an answer can echo
    it: the wire carries no integer past 64 bits)."""
    raw = query.get(name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    if not math.isfinite(value):
        return None
    return int(value) if abs(value) < 2**53 else float(math.trunc(value))


class Answers:
    def __init__(self, execute: Executor, connections: Callable[[], dict[str, int]],
                 totals: Callable[[], Totals], storage_status: StorageStatus) -> None:
        self.execute = execute
        self.storage_status = storage_status
        self.connections = connections
        # Job counts over every queue, as the original's health and stats count them: waiting without the
        # prioritized jobs, paused queues included.
        self.totals = totals
        self.started = time.monotonic()
        self.health_memory: dict[str, float] = {}
        self.health_memory_json = b"{}"
        self.health_memory_at = -math.inf

    async def special(self, name: str, params: dict[str, str], query: Query, body: Doc) -> tuple[Doc | list[Any], int]:
        answer: Callable[[dict[str, str], Query], Awaitable[tuple[Doc | list[Any], int]]] = getattr(self, name)
        return await answer(params, query)

    # -- probes ------------------------------------------------------------------------------------

    async def storage(self) -> Doc:
        status = self.storage_status()
        return status if type(status) is dict else await status  # type: ignore[misc]

    def health_of(self, storage: Doc) -> tuple[Doc, int]:
        """The /health answer, given the storage status."""
        degraded = _unhealthy(storage)
        t = self.totals()
        queues = {"waiting": t.waiting, "active": t.active, "delayed": t.delayed, "completed": t.completed,
                  "dlq": t.dlq}
        now = self._read_memory()
        doc: Doc = {"ok": not degraded, "status": "degraded" if degraded else "healthy",
                    "uptime": int(now - self.started), "version": __version__,
                    "queues": queues, "connections": self.connections(), "memory": self.health_memory}
        if degraded:
            doc["storage"] = storage
        return doc, 503 if degraded else 200

    def health_body(self, storage: Doc) -> tuple[bytes, int]:
        """``health_of`` as the JSON body it answers, and its status."""
        if _unhealthy(storage):
            doc, status = self.health_of(storage)
            return json_bytes(doc), status
        t = self.totals()
        now = self._read_memory()
        c = self.connections()
        return HEALTHY_BODY % (int(now - self.started), t.waiting, t.active, t.delayed, t.completed, t.dlq,
                               c["tcp"], c["ws"], c["sse"], self.health_memory_json), 200

    def _read_memory(self) -> float:
        """Refresh the memory reading when it is ``HEALTH_MEMORY_TTL_S`` old; the time now."""
        now = time.monotonic()
        if now - self.health_memory_at >= HEALTH_MEMORY_TTL_S:
            self.health_memory, self.health_memory_at = memory_mb(), now
            self.health_memory_json = json_bytes(self.health_memory)
        return now

    async def ready(self) -> tuple[Doc, int]:
        storage = await self.storage()
        ready = not _unhealthy(storage)
        doc: Doc = {"ok": ready, "ready": ready}
        if not ready:
            doc["storage"] = storage
        return doc, 200 if ready else 503

    async def gc(self) -> Doc:
        before = memory_mb()
        await self.execute({"cmd": "CompactMemory"})
        gc.collect()
        return {"ok": True, "before": before, "after": memory_mb()}

    async def heapstats(self) -> Doc:
        _, overview = await self.overview()
        objects = gc.get_objects()
        top = Counter(type(o).__name__ for o in objects).most_common(20)
        return {"ok": True, "memory": memory_mb(),
                "heap": {"objectCount": len(objects), "protectedCount": 0, "globalCount": len(sys.modules)},
                "collections": overview.get("collections") or {},
                "topObjectTypes": [{"type": t, "count": c} for t, c in top]}

    # -- monitoring --------------------------------------------------------------------------------

    async def prometheus(self) -> str:
        reply = await self.execute({"cmd": "Prometheus"})
        text = reply.get("metrics") or (reply.get("data") or {}).get("metrics") or ""
        return str(text)

    async def overview(self) -> tuple[bool, Doc]:
        reply = await self.execute({"cmd": "DashboardOverview"})
        return bool(reply.get("ok")), reply.get("data") or {}

    async def stats(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        ok, overview = await self.overview()
        t = self.totals()
        stats: Doc = dict(overview.get("stats") or {})
        stats.update(overview.get("throughput") or {})
        stats.update({
            "waiting": t.waiting, "prioritized": t.prioritized, "waiting-children": t.waiting_children,
            "cronJobs": len(overview.get("crons") or []), "cronPending": 0,
        })
        memory = {**memory_mb(), "external": 0, "arrayBuffers": 0}
        return {"ok": ok, "stats": stats, "memory": memory, "collections": overview.get("collections") or {}}, 200

    async def metrics(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        ok, overview = await self.overview()
        stats = overview.get("stats") or {}
        keys = ("totalPushed", "totalPulled", "totalCompleted", "totalFailed")
        return {"ok": ok, "metrics": {k: stats.get(k, 0) for k in keys}}, 200

    async def dashboard(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        ok, overview = await self.overview()
        doc: Doc = {"ok": ok, **overview}
        doc["stats"] = {**(overview.get("stats") or {}), "waiting": self.totals().waiting}
        workers = overview.get("workers") or {}
        listed = workers.get("list") or []
        doc["workers"] = {**workers, "list": listed[:DASHBOARD_LIST_MAX], "truncated": len(listed) > DASHBOARD_LIST_MAX}
        crons = overview.get("crons") or []
        doc["crons"] = {"total": len(crons), "list": crons[:DASHBOARD_LIST_MAX],
                        "truncated": len(crons) > DASHBOARD_LIST_MAX}
        return doc, 200

    async def dashboard_queues(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        limit = _int_query(query, "limit") or DASHBOARD_LIMIT_DEFAULT
        limit = min(max(limit, 1), DASHBOARD_LIMIT_MAX)
        offset = max(_int_query(query, "offset") or 0, 0)
        reply = await self.execute({"cmd": "DashboardQueues"})
        data = reply.get("data") or {}
        rows = data.get("queues") or []
        keys = ("name", "waiting", "delayed", "active", "dlq", "paused")
        page = [{k: row.get(k) for k in keys} for row in rows[int(offset):int(offset + limit)]]
        return {"ok": bool(reply.get("ok")), "queues": page, "total": len(rows), "limit": limit, "offset": offset,
                "timestamp": data.get("timestamp")}, 200

    async def dashboard_queue(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        cmd: Doc = {"cmd": "DashboardQueue", "queue": params["q"]}
        if query.get("includeJobs") == "true":
            cmd["includeJobs"] = True
        reply = await self.execute(cmd)
        if not reply.get("ok"):
            return reply, 400
        return {"ok": True, **(reply.get("data") or {})}, 200

    # -- queues ------------------------------------------------------------------------------------

    async def queues_summary(self, params: dict[str, str], query: Query) -> tuple[list[Any], int]:
        names = (await self.execute({"cmd": "ListQueues"})).get("queues") or []
        keys = ("waiting", "prioritized", "active", "completed", "failed", "delayed")
        summary = []
        for name in names:
            counts = (await self.execute({"cmd": "GetJobCounts", "queue": name})).get("counts") or {}
            paused = (await self.execute({"cmd": "IsPaused", "queue": name})).get("paused", False)
            summary.append({"name": name, "paused": paused, "counts": {k: counts.get(k, 0) for k in keys}})
        return summary, 200

    async def queue_workers(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        reply = await self.execute({"cmd": "ListWorkers"})
        workers = (reply.get("data") or {}).get("workers") or reply.get("workers") or []
        keys = ("id", "name", "queues", "concurrency", "registeredAt", "lastSeen", "activeJobs", "processedJobs",
                "failedJobs")
        mine = [{k: w.get(k) for k in keys} for w in workers if params["q"] in (w.get("queues") or [])]
        return {"ok": True, "workers": mine}, 200

    async def dlq_page(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        reply = await self.execute({"cmd": "Dlq", "queue": params["q"]})
        entries = reply.get("entries") or []
        offset = max(_int_query(query, "offset") or 0, 0)
        limit = _int_query(query, "limit")
        end = len(entries) if limit is None else offset + max(limit, 0)
        return {"ok": bool(reply.get("ok")), "entries": entries[int(offset):int(end)], "total": len(entries)}, 200

    async def dlq_stats(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        reply = await self.execute({"cmd": "GetDlqStats", "queue": params["q"]})
        return {"ok": bool(reply.get("ok")), "stats": (reply.get("data") or {}).get("stats")}, 200


def _unhealthy(storage: Doc) -> bool:
    """A full disk, or a database the broker cannot reach (PostgreSQL mode)."""
    return bool(storage.get("diskFull")) or storage.get("reachable") is False

"""HTTP answers that are not one command's reply: probes, summaries, pages and reshaped replies.

Each is composed from ordinary commands through the same executor as every route, so no job rule is
written here; only the shape of the answer is. Monitoring answers (`/stats`, `/metrics`, dashboards,
`/prometheus`) come from the monitoring commands; health and readiness from counts and storage status.
"""
from __future__ import annotations

import gc
import math
import resource
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from bunqueue import __version__

Executor = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
Doc = dict[str, Any]
Query = Mapping[str, str]
MB = 1024 * 1024
DASHBOARD_LIMIT_MAX = 500
DASHBOARD_LIMIT_DEFAULT = 100


def memory_mb() -> dict[str, float]:
    """Resident set size (and the interpreter's view of its heap) in MB, as the original reports."""
    rss = _rss_bytes()
    allocated = sys.getallocatedblocks() * 64
    return {"heapUsed": round(allocated / MB, 2), "heapTotal": round(rss / MB, 2), "rss": round(rss / MB, 2)}


def _rss_bytes() -> int:
    try:
        with open("/proc/self/statm") as statm:
            return int(statm.read().split()[1]) * resource.getpagesize()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _int_query(query: Query, name: str) -> int | None:
    raw = query.get(name)
    if raw is None:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return int(value) if math.isfinite(value) else None


class Answers:
    def __init__(self, execute: Executor, connections: Callable[[], dict[str, int]]) -> None:
        self.execute = execute
        self.connections = connections
        self.started = time.monotonic()

    async def special(self, name: str, params: dict[str, str], query: Query, body: Doc) -> tuple[Doc | list[Any], int]:
        answer: Callable[[dict[str, str], Query], Awaitable[tuple[Doc | list[Any], int]]] = getattr(self, name)
        return await answer(params, query)

    # -- probes ------------------------------------------------------------------------------------

    async def totals(self) -> dict[str, int]:
        queues = (await self.execute({"cmd": "ListQueues"})).get("queues") or []
        totals = {"waiting": 0, "active": 0, "delayed": 0, "completed": 0, "dlq": 0}
        for name in queues:
            counts = (await self.execute({"cmd": "GetJobCounts", "queue": name})).get("counts") or {}
            totals["waiting"] += int(counts.get("waiting", 0)) + int(counts.get("prioritized", 0))
            for key in ("active", "delayed", "completed"):
                totals[key] += int(counts.get(key, 0))
        stats = (await self.execute({"cmd": "GetDlqStats"})).get("data", {}).get("stats", {})
        totals["dlq"] = int(stats.get("total", 0))
        return totals

    async def storage(self) -> Doc:
        reply = await self.execute({"cmd": "StorageStatus"})
        data: Doc = reply.get("data") or {}
        return data

    async def health(self) -> tuple[Doc, int]:
        storage = await self.storage()
        degraded = bool(storage.get("diskFull"))
        doc: Doc = {"ok": not degraded, "status": "degraded" if degraded else "healthy",
                    "uptime": int(time.monotonic() - self.started), "version": __version__,
                    "queues": await self.totals(), "connections": self.connections(), "memory": memory_mb()}
        if degraded:
            doc["storage"] = storage
        return doc, 503 if degraded else 200

    async def ready(self) -> tuple[Doc, int]:
        storage = await self.storage()
        ready = not storage.get("diskFull")
        doc: Doc = {"ok": ready, "ready": ready}
        if not ready:
            doc["storage"] = storage
        return doc, 200 if ready else 503

    async def gc(self) -> Doc:
        before = memory_mb()
        await self.execute({"cmd": "CompactMemory"})
        gc.collect()
        return {"ok": True, "before": before, "after": memory_mb()}

    def heapstats(self) -> Doc:
        objects = gc.get_objects()
        top = Counter(type(o).__name__ for o in objects).most_common(20)
        return {"ok": True, "memory": memory_mb(),
                "heap": {"objectCount": len(objects), "protectedCount": 0, "globalCount": len(sys.modules)},
                "collections": {}, "topObjectTypes": [{"type": t, "count": c} for t, c in top]}

    # -- monitoring --------------------------------------------------------------------------------

    async def prometheus(self) -> str:
        reply = await self.execute({"cmd": "Prometheus"})
        text = reply.get("metrics") or (reply.get("data") or {}).get("metrics") or ""
        return str(text)

    async def stats(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        reply = await self.execute({"cmd": "Stats"})
        return reply, 200

    async def metrics(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        reply = await self.execute({"cmd": "Stats"})
        stats = reply.get("stats") or {}
        keys = ("totalPushed", "totalPulled", "totalCompleted", "totalFailed")
        return {"ok": bool(reply.get("ok")), "metrics": {k: stats.get(k, 0) for k in keys}}, 200

    async def dashboard(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        return await self.execute({"cmd": "DashboardOverview"}), 200

    async def dashboard_queues(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        limit = _int_query(query, "limit") or DASHBOARD_LIMIT_DEFAULT
        limit = min(max(limit, 1), DASHBOARD_LIMIT_MAX)
        offset = max(_int_query(query, "offset") or 0, 0)
        return await self.execute({"cmd": "DashboardQueues", "limit": limit, "offset": offset}), 200

    async def dashboard_queue(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        cmd: Doc = {"cmd": "DashboardQueue", "queue": params["q"]}
        if query.get("includeJobs") == "true":
            cmd["includeJobs"] = True
        reply = await self.execute(cmd)
        return reply, 200 if reply.get("ok") else 400

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
        return {"ok": bool(reply.get("ok")), "entries": entries[offset:end], "total": len(entries)}, 200

    async def dlq_stats(self, params: dict[str, str], query: Query) -> tuple[Doc, int]:
        reply = await self.execute({"cmd": "GetDlqStats", "queue": params["q"]})
        return {"ok": bool(reply.get("ok")), "stats": (reply.get("data") or {}).get("stats")}, 200

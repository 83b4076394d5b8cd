"""The REST route table: (method, path) to one protocol command and the status rule of its answer.

Path segments are `[^/]+` and match exactly (no trailing slash). Queue names, cron names and custom
ids are %-decoded; job, webhook and worker ids are used as written, as the Bun original does. A route
either builds a command (`Route.build`) or names a special answer that the application computes
(`Route.special`: health, dashboards, summaries, DLQ pages).
"""
from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

Body = dict[str, Any]
Query = Mapping[str, list[str]]
Command = dict[str, Any]
Builder = Callable[[dict[str, str], Query, Body], Command]

# What the answer's status is: always 200, or 200 only when the reply is ok.
ALWAYS = "200"
OR_400 = "200/400"
OR_404 = "200/404"
# How the body is read: absent/blank means {} ("optional"), absent is an error ("required"), never read.
OPTIONAL, REQUIRED, IGNORED, LENIENT = "optional", "required", "ignored", "lenient"
PUSH_FIELDS = ("data", "priority", "delay", "maxAttempts", "backoff", "timeout", "jobId", "removeOnComplete",
               "removeOnFail", "durable", "ttl", "uniqueKey", "groupId", "dependsOn", "tags", "lifo", "repeat")
CRON_FIELDS = ("name", "queue", "data", "schedule", "repeatEvery", "priority", "maxLimit", "timezone",
               "uniqueKey", "dedup", "skipMissedOnRestart", "immediately", "skipIfNoWorker", "preventOverlap",
               "jobOptions")


class BadEscape(ValueError):
    """A %-escape in a decoded path parameter is malformed."""


@dataclass(frozen=True)
class Route:
    method: str
    pattern: str
    build: Builder | None = None
    status: str = ALWAYS
    body: str = OPTIONAL
    special: str | None = None
    decoded: tuple[str, ...] = ()


def pick(body: Body, *names: str) -> Command:
    return {n: body[n] for n in names if n in body}


def _name_or_default(value: Any) -> str:
    return value if isinstance(value, str) else "default"


_PUSH_FIELD_ORDER = {name: i for i, name in enumerate(PUSH_FIELDS)}


def _push(p: dict[str, str], q: Query, b: Body) -> Command:
    cmd = {"cmd": "PUSH", "queue": p["q"], "name": _name_or_default(b.get("name"))}
    # The hot route: a push body carries a few of the fields, so look up those it has (in the fields' order).
    fields = [name for name in b if name in _PUSH_FIELD_ORDER]
    if len(fields) > 1:
        fields.sort(key=_PUSH_FIELD_ORDER.__getitem__)
    for name in fields:
        cmd[name] = b[name]
    if "maxAttempts" not in b and "attempts" in b:
        cmd["maxAttempts"] = b["attempts"]
    return cmd


def _bulk(p: dict[str, str], q: Query, b: Body) -> Command:
    jobs = b.get("jobs", [])
    if isinstance(jobs, list):
        jobs = [{**j, "name": _name_or_default(j.get("name"))} if isinstance(j, dict) else j for j in jobs]
    return {"cmd": "PUSHB", "queue": p["q"], "jobs": jobs}


def int_prefix(text: str) -> float:
    """JavaScript's parseInt: the leading integer of the text, NaN when there is none."""
    match = re.match(r"\s*([+-]?\d+)", text)
    return float(match.group(1)) if match else math.nan


def first(query: Query, name: str) -> str | None:
    values = query.get(name)
    return values[0] if values else None


def _pull(p: dict[str, str], q: Query, b: Body) -> Command:
    raw = first(q, "timeout")
    timeout = 0 if raw is None else int_prefix(raw)
    return {"cmd": "PULL", "queue": p["q"], "timeout": int(timeout) if math.isfinite(timeout) else timeout}


def _list(p: dict[str, str], q: Query, b: Body) -> Command:
    states = [s for name in ("state", "status", "states") for v in q.get(name, []) for s in v.split(",") if s]
    cmd: Command = {"cmd": "GetJobs", "queue": p["q"]}
    if states:
        unique = list(dict.fromkeys(states))
        cmd["state"] = unique[0] if len(unique) == 1 else unique
    for name in ("limit", "offset"):
        raw = first(q, name)
        if raw is not None:
            value = int_prefix(raw)
            if math.isfinite(value):
                cmd[name] = int(value)
    return cmd


def by_id(cmd: str, *fields: str) -> Builder:
    return lambda p, q, b: {"cmd": cmd, "id": p["id"], **pick(b, *fields)}


def by_queue(cmd: str, *fields: str) -> Builder:
    return lambda p, q, b: {"cmd": cmd, "queue": p["q"], **pick(b, *fields)}


def fixed(cmd: str) -> Builder:
    return lambda p, q, b: {"cmd": cmd}


def _clean(p: dict[str, str], q: Query, b: Body) -> Command:
    grace = b.get("grace")
    number = isinstance(grace, int | float) and not isinstance(grace, bool)
    return {"cmd": "Clean", "queue": p["q"], "grace": grace if number else 0, **pick(b, "state", "limit")}


def _config(cmd: str) -> Builder:
    def build(p: dict[str, str], q: Query, b: Body) -> Command:
        config = b["config"] if "config" in b else b
        return {"cmd": cmd, "queue": p["q"], "config": config}
    return build


def _concurrency(p: dict[str, str], q: Query, b: Body) -> Command:
    limit = b["concurrency"] if "concurrency" in b else b.get("limit")
    return {"cmd": "SetConcurrency", "queue": p["q"], **({} if limit is None else {"limit": limit})}


def _cron(p: dict[str, str], q: Query, b: Body) -> Command:
    cmd = {"cmd": "Cron", **pick(b, *CRON_FIELDS)}
    cmd["jobName"] = _name_or_default(b.get("jobName"))
    return cmd


def _wait(p: dict[str, str], q: Query, b: Body) -> Command:
    return {"cmd": "WaitJob", "id": p["id"], "timeout": b.get("timeout", 30000)}


def _register_worker(p: dict[str, str], q: Query, b: Body) -> Command:
    return {"cmd": "RegisterWorker", **pick(b, "name", "queues", "concurrency", "workerId", "hostname", "pid",
                                              "startedAt")}


ROUTES: tuple[Route, ...] = (
    # Monitoring answers that are plain commands.
    Route("GET", "/ping", fixed("Ping")),
    Route("GET", "/storage", fixed("StorageStatus")),
    Route("GET", "/stats", special="stats"),
    Route("GET", "/metrics", special="metrics"),
    Route("GET", "/dashboard", special="dashboard"),
    Route("GET", "/dashboard/queues", special="dashboard_queues"),
    Route("GET", "/dashboard/queues/:q", special="dashboard_queue", status=OR_400, decoded=("q",)),
    # Queue job operations.
    Route("POST", "/queues/:q/jobs", _push, OR_400, REQUIRED, decoded=("q",)),
    Route("GET", "/queues/:q/jobs", _pull, decoded=("q",)),
    Route("POST", "/queues/:q/jobs/bulk", _bulk, OR_400, REQUIRED, decoded=("q",)),
    Route("POST", "/queues/:q/jobs/pull-batch", by_queue("PULLB", "count", "timeout", "owner", "lockTtl"),
          decoded=("q",)),
    Route("GET", "/queues/:q/jobs/list", _list, decoded=("q",)),
    # Batches (before /jobs/:id so that their paths are not read as ids for POST).
    Route("POST", "/jobs/ack-batch", lambda p, q, b: {"cmd": "ACKB", **pick(b, "ids", "results", "tokens")},
          OR_400),
    Route("POST", "/jobs/extend-locks",
          lambda p, q, b: {"cmd": "ExtendLocks", **pick(b, "ids", "tokens", "durations")}, OR_400),
    Route("POST", "/jobs/heartbeat-batch", lambda p, q, b: {"cmd": "JobHeartbeatB", **pick(b, "ids", "tokens")},
          OR_400),
    # Jobs by id.
    Route("GET", "/jobs/custom/:customId", lambda p, q, b: {"cmd": "GetJobByCustomId", "customId": p["customId"]},
          OR_404, decoded=("customId",)),
    Route("GET", "/jobs/:id", by_id("GetJob"), OR_404),
    Route("DELETE", "/jobs/:id", by_id("Cancel")),
    Route("GET", "/jobs/:id/state", by_id("GetState"), OR_404),
    Route("GET", "/jobs/:id/result", by_id("GetResult"), OR_404),
    Route("GET", "/jobs/:id/progress", by_id("GetProgress"), OR_404),
    Route("POST", "/jobs/:id/progress", by_id("Progress", "progress", "message"), OR_400),
    Route("GET", "/jobs/:id/children", by_id("GetChildrenValues"), OR_404),
    Route("GET", "/jobs/:id/logs", by_id("GetLogs")),
    Route("POST", "/jobs/:id/logs", by_id("AddLog", "message", "level"), OR_400),
    Route("DELETE", "/jobs/:id/logs", by_id("ClearLogs")),
    Route("POST", "/jobs/:id/ack", by_id("ACK", "result", "token"), OR_400),
    Route("POST", "/jobs/:id/fail", by_id("FAIL", "error", "token", "unrecoverable", "stack"), OR_400),
    Route("POST", "/jobs/:id/promote", by_id("Promote"), OR_400, IGNORED),
    Route("PUT", "/jobs/:id/data", by_id("Update", "data"), OR_400, REQUIRED),
    Route("PUT", "/jobs/:id/priority", by_id("ChangePriority", "priority", "lifo"), OR_400),
    Route("POST", "/jobs/:id/discard", by_id("Discard"), OR_400, IGNORED),
    Route("POST", "/jobs/:id/move-to-delayed", by_id("MoveToDelayed", "delay", "token"), OR_400),
    Route("PUT", "/jobs/:id/delay", by_id("ChangeDelay", "delay"), OR_400),
    Route("POST", "/jobs/:id/heartbeat", by_id("JobHeartbeat", "token", "duration"), OR_400),
    Route("POST", "/jobs/:id/wait", _wait),
    Route("POST", "/jobs/:id/extend-lock", by_id("ExtendLock", "duration", "token"), OR_400),
    Route("POST", "/jobs/:id/move-to-wait", by_id("MoveToWait", "token"), OR_400),
    # Queues.
    Route("GET", "/queues", fixed("ListQueues")),
    Route("GET", "/queues/summary", special="queues_summary"),
    Route("GET", "/queues/:q/counts", by_queue("GetJobCounts"), decoded=("q",)),
    Route("GET", "/queues/:q/count", by_queue("Count"), decoded=("q",)),
    Route("GET", "/queues/:q/priority-counts", by_queue("GetCountsPerPriority"), decoded=("q",)),
    Route("GET", "/queues/:q/paused", by_queue("IsPaused"), decoded=("q",)),
    Route("GET", "/queues/:q/workers", special="queue_workers", decoded=("q",)),
    *(Route("POST", f"/queues/:q/{verb}", by_queue(cmd), body=IGNORED, decoded=("q",))
      for verb, cmd in (("pause", "Pause"), ("resume", "Resume"), ("drain", "Drain"), ("obliterate", "Obliterate"))),
    Route("POST", "/queues/:q/clean", _clean, decoded=("q",)),
    Route("POST", "/queues/:q/promote-jobs", by_queue("PromoteJobs", "count"), decoded=("q",)),
    Route("POST", "/queues/:q/retry-completed", by_queue("RetryCompleted", "id"), decoded=("q",)),
    Route("GET", "/queues/:q/dlq", special="dlq_page", decoded=("q",)),
    Route("GET", "/queues/:q/dlq/stats", special="dlq_stats", decoded=("q",)),
    Route("POST", "/queues/:q/dlq/retry", by_queue("RetryDlq", "jobId"), decoded=("q",)),
    Route("POST", "/queues/:q/dlq/purge", by_queue("PurgeDlq"), body=IGNORED, decoded=("q",)),
    Route("PUT", "/queues/:q/rate-limit", by_queue("RateLimit", "limit", "duration", "ttl"), decoded=("q",)),
    Route("DELETE", "/queues/:q/rate-limit", by_queue("RateLimitClear"), decoded=("q",)),
    # Not a route of the original: the dashboard shows a queue's limits (the command is the protocol's).
    Route("GET", "/queues/:q/limits", by_queue("GetQueueLimits"), decoded=("q",)),
    Route("PUT", "/queues/:q/concurrency", _concurrency, decoded=("q",)),
    Route("DELETE", "/queues/:q/concurrency", by_queue("ClearConcurrency"), decoded=("q",)),
    Route("GET", "/queues/:q/stall-config", by_queue("GetStallConfig"), decoded=("q",)),
    Route("PUT", "/queues/:q/stall-config", _config("SetStallConfig"), decoded=("q",)),
    Route("GET", "/queues/:q/dlq-config", by_queue("GetDlqConfig"), decoded=("q",)),
    Route("PUT", "/queues/:q/dlq-config", _config("SetDlqConfig"), decoded=("q",)),
    # Crons, webhooks, workers.
    Route("GET", "/crons", fixed("CronList")),
    Route("POST", "/crons", _cron, OR_400, REQUIRED),
    Route("GET", "/crons/:name", lambda p, q, b: {"cmd": "CronGet", "name": p["name"]}, OR_404, decoded=("name",)),
    Route("DELETE", "/crons/:name", lambda p, q, b: {"cmd": "CronDelete", "name": p["name"]}, OR_404,
          decoded=("name",)),
    Route("GET", "/webhooks", fixed("ListWebhooks")),
    Route("POST", "/webhooks", lambda p, q, b: {"cmd": "AddWebhook", **pick(b, "url", "events", "queue", "secret")},
          OR_400, REQUIRED),
    Route("DELETE", "/webhooks/:id", lambda p, q, b: {"cmd": "RemoveWebhook", "webhookId": p["id"]}, OR_404),
    Route("PUT", "/webhooks/:id/enabled",
          lambda p, q, b: {"cmd": "SetWebhookEnabled", "id": p["id"], **pick(b, "enabled")}, OR_400),
    Route("GET", "/workers", fixed("ListWorkers")),
    Route("POST", "/workers", _register_worker, OR_400, REQUIRED),
    Route("DELETE", "/workers/:id", lambda p, q, b: {"cmd": "UnregisterWorker", "workerId": p["id"]}, OR_404),
    Route("POST", "/workers/:id/heartbeat",
          lambda p, q, b: {"cmd": "Heartbeat", "id": p["id"], **pick(b, "activeJobs", "processed", "failed")},
          body=LENIENT),
)


def _compile(pattern: str) -> re.Pattern[str]:
    parts = [f"(?P<{seg[1:]}>[^/]+)" if seg.startswith(":") else re.escape(seg) for seg in pattern.split("/")]
    return re.compile("/".join(parts) + r"\Z")


def _first_segment(path: str) -> str:
    return path.split("/", 2)[1] if path.startswith("/") else ""


# Every pattern starts with a literal segment: a path is tried only against the routes of its method whose
# pattern starts with the same one, in table order.
def _index() -> dict[tuple[str, str], tuple[tuple[Route, re.Pattern[str]], ...]]:
    table: dict[tuple[str, str], tuple[tuple[Route, re.Pattern[str]], ...]] = {}
    for route in ROUTES:
        assert not route.pattern.startswith("/:"), route.pattern
        key = (route.method, _first_segment(route.pattern))
        table[key] = (*table.get(key, ()), (route, _compile(route.pattern)))
    return table


_TABLE = _index()


def decode(text: str) -> str:
    """decodeURIComponent: a malformed escape is an error, not passed through."""
    if "%" not in text:
        return text
    if re.search(r"%(?![0-9A-Fa-f]{2})", text):
        raise BadEscape(text)
    try:
        return unquote(text, errors="strict")
    except UnicodeDecodeError as exc:
        raise BadEscape(text) from exc


def match(method: str, path: str) -> tuple[Route, dict[str, str]] | None:
    """The first route for the method and path, with its parameters (decoded where the route says)."""
    found = _matched(method, path)
    return None if found is None else (found[0], dict(found[1]))


# Clients call the same few paths over and over (a producer pushes to its queue): the answers are kept.
@functools.lru_cache(maxsize=4096)
def _matched(method: str, path: str) -> tuple[Route, tuple[tuple[str, str], ...]] | None:
    for route, regex in _TABLE.get((method, _first_segment(path)), ()):
        found = regex.match(path)
        if found is not None:
            params = found.groupdict()
            for name in route.decoded:
                params[name] = decode(params[name])
            return route, tuple(params.items())
    return None


def status_for(route: Route, reply: Mapping[str, Any]) -> int:
    if route.status == ALWAYS or reply.get("ok"):
        return 200
    return 400 if route.status == OR_400 else 404

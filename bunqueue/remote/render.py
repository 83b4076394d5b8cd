"""Replies as readable text: tables for lists, aligned key/value blocks for one record.

`--json` bypasses all of this and prints the reply itself. The text form picks its shape from what
the reply holds (a job, a list of jobs, queues, workers, crons, webhooks, log lines, counters), so a
field the server adds later shows up in the JSON form without a change here.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

Reply = dict[str, Any]
Record = dict[str, Any]
Columns = Sequence[tuple[str, Callable[[Record], Any]]]
# Reply keys that say nothing to a reader of the text form.
QUIET_KEYS = frozenset({"ok", "reqId"})


def when(value: Any) -> str:
    """An epoch-milliseconds field as ISO time; anything else as it is."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return datetime.fromtimestamp(value / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return "" if value is None else str(value)


def scalar(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "yes" if value else "no"
    return json.dumps(value, separators=(",", ":"), default=str)


def table(rows: Sequence[Record], columns: Columns, empty: str) -> str:
    if not rows:
        return empty
    cells = [[h for h, _ in columns]] + [[scalar(get(r)) for _, get in columns] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def block(pairs: Iterable[tuple[str, Any]]) -> str:
    shown = [(k, scalar(v)) for k, v in pairs if v is not None and v != ""]
    width = max((len(k) for k, _ in shown), default=0)
    return "\n".join(f"{k + ':':<{width + 1}} {v}" for k, v in shown)


def job_block(job: dict[str, Any]) -> str:
    pairs: list[tuple[str, Any]] = [
        ("id", job.get("id")), ("name", job.get("name")), ("queue", job.get("queue")),
        ("state", job.get("state")), ("priority", job.get("priority")),
        ("attempts", f"{job.get('attempts', 0)}/{job.get('maxAttempts', '?')}"),
        ("data", job.get("data")), ("progress", job.get("progress") or None),
        ("created", when(job.get("createdAt"))), ("runs at", when(job.get("runAt"))),
        ("started", when(job.get("startedAt"))), ("completed", when(job.get("completedAt"))),
        ("lock token", job.get("lockToken") or job.get("token")),
    ]
    return block(pairs)


JOB_COLUMNS: Columns = (("id", lambda j: j.get("id")), ("name", lambda j: j.get("name")),
               ("state", lambda j: j.get("state")), ("priority", lambda j: j.get("priority")),
               ("attempts", lambda j: f"{j.get('attempts', 0)}/{j.get('maxAttempts', '?')}"),
               ("created", lambda j: when(j.get("createdAt"))))
DLQ_COLUMNS: Columns = (("id", lambda j: j.get("id")), ("name", lambda j: j.get("name")),
                        ("attempts", lambda j: f"{j.get('attempts', 0)}/{j.get('maxAttempts', '?')}"),
                        ("stalls", lambda j: j.get("stallCount")), ("created", lambda j: when(j.get("createdAt"))),
                        ("data", lambda j: j.get("data")))
WORKER_COLUMNS: Columns = (("id", lambda w: w.get("id")), ("name", lambda w: w.get("name")),
                  ("queues", lambda w: ",".join(w.get("queues") or [])), ("status", lambda w: w.get("status")),
                  ("active", lambda w: w.get("activeJobs")), ("processed", lambda w: w.get("processedJobs")),
                  ("failed", lambda w: w.get("failedJobs")), ("last seen", lambda w: when(w.get("lastSeen"))))
CRON_COLUMNS: Columns = (("name", lambda c: c.get("name")), ("queue", lambda c: c.get("queue")),
                ("schedule", lambda c: c.get("schedule") or (f"every {c['repeatEvery']} ms"
                                                             if c.get("repeatEvery") else "")),
                ("timezone", lambda c: c.get("timezone")), ("next run", lambda c: when(c.get("nextRun"))),
                ("runs", lambda c: c.get("executions")), ("max", lambda c: c.get("maxLimit")))
WEBHOOK_COLUMNS: Columns = (("id", lambda h: h.get("id")), ("url", lambda h: h.get("url")),
                   ("events", lambda h: ",".join(h.get("events") or [])), ("queue", lambda h: h.get("queue")),
                   ("enabled", lambda h: h.get("enabled")), ("ok", lambda h: h.get("successCount")),
                   ("failed", lambda h: h.get("failureCount")))
LOG_COLUMNS: Columns = (("time", lambda e: when(e.get("timestamp"))), ("level", lambda e: e.get("level")),
               ("message", lambda e: e.get("message")))

LISTS: tuple[tuple[str, Columns, str], ...] = (
    ("workers", WORKER_COLUMNS, "no workers"), ("crons", CRON_COLUMNS, "no crons"),
    ("webhooks", WEBHOOK_COLUMNS, "no webhooks"), ("logs", LOG_COLUMNS, "no logs"),
)


def _field(key: str) -> Callable[[Record], Any]:
    return lambda record: record.get(key)


def _queues(queues: list[Any]) -> str:
    if queues and all(isinstance(q, dict) for q in queues):
        keys = list(dict.fromkeys(k for q in queues for k in q))
        return table(queues, [(k, _field(k)) for k in keys], "no queues")
    return "\n".join(map(str, queues)) if queues else "no queues"


def _lists(reply: Reply, cmd: str) -> str | None:
    if "jobs" in reply and isinstance(reply["jobs"], list):
        columns = DLQ_COLUMNS if cmd == "Dlq" else JOB_COLUMNS
        return table(reply["jobs"], columns, "the DLQ is empty" if cmd == "Dlq" else "no jobs")
    for key, columns, empty in LISTS:
        if isinstance(reply.get(key), list):
            return table(reply[key], columns, empty)
    if isinstance(reply.get("queues"), list) and cmd == "ListQueues":
        return _queues(reply["queues"])
    return None


def render(cmd: str, reply: Reply) -> str:
    """The text form of a successful reply to `cmd`."""
    body = reply.get("data") if isinstance(reply.get("data"), dict) and cmd not in ("GetJob", "PULL") else None
    reply = {**reply, **body} if body else reply
    if cmd == "PUSH" and "id" in reply:
        return f"job created: {reply['id']}"
    if "job" in reply:
        return "no job available" if reply["job"] is None else job_block(reply["job"])
    listed = _lists(reply, cmd)
    if listed is not None:
        return listed
    for key in ("metrics", "text"):
        if isinstance(reply.get(key), str):
            return str(reply[key]).rstrip("\n")
    for key in ("stats", "counts"):
        if isinstance(reply.get(key), dict):
            return block(reply[key].items())
    rest = [(k, v) for k, v in reply.items() if k not in QUIET_KEYS]
    return block(rest) if rest else "ok"

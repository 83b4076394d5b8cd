"""The JSON shapes of the original's MCP results, made from protocol replies, and their text."""
from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any


def text(value: Any, *, pretty: bool = False) -> str:
    """``value`` as the original's ``JSON.stringify`` writes it: integral floats as integers, ``None``
    members of objects dropped where the original leaves a member undefined (see :func:`defined`)."""
    plain = _plain(value)
    if pretty:
        return json.dumps(plain, indent=2, ensure_ascii=False)
    return json.dumps(plain, separators=(",", ":"), ensure_ascii=False)


def _plain(value: Any) -> Any:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def defined(**members: Any) -> dict[str, Any]:
    """An object without its ``None`` members: what JSON of an object with undefined members holds."""
    return {key: value for key, value in members.items() if value is not None}


def iso(ms: Any) -> str | None:
    """Epoch milliseconds as ``Date.toISOString`` writes them; ``None`` for none."""
    if not isinstance(ms, int | float) or isinstance(ms, bool) or not ms:
        return None
    whole = int(ms)
    stamp = datetime.fromtimestamp(whole // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{whole % 1000:03d}Z"


def job(raw: dict[str, Any]) -> dict[str, Any]:
    return defined(
        id=str(raw.get("id")),
        name=raw.get("name"),
        queue=raw.get("queue") or "",
        data=raw.get("data"),
        priority=raw.get("priority") or 0,
        progress=raw.get("progress") or 0,
        attempts=raw.get("attempts") or 0,
        maxAttempts=raw.get("maxAttempts") if raw.get("maxAttempts") is not None else 3,
        createdAt=iso(raw.get("createdAt")),
        startedAt=iso(raw.get("startedAt")),
    )


def cron(raw: dict[str, Any]) -> dict[str, Any]:
    shape = defined(
        name=raw.get("name"),
        queue=raw.get("queue"),
        schedule=raw.get("schedule"),
        repeatEvery=raw.get("repeatEvery"),
    )
    shape["nextRun"] = iso(raw.get("nextRun"))
    shape["executions"] = raw.get("executions") or 0
    return shape


def worker(raw: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": str(raw.get("id") or raw.get("workerId")),
        "name": raw.get("name"),
        "queues": raw.get("queues") or [],
        "active": raw.get("activeJobs") or 0,
        "processed": raw.get("processedJobs") or 0,
        "failed": raw.get("failedJobs") or 0,
        "lastHeartbeat": raw.get("lastSeen") or 0,
    }


def webhook(raw: dict[str, Any]) -> dict[str, Any]:
    return defined(
        id=str(raw.get("id")),
        url=raw.get("url"),
        events=raw.get("events") or [],
        queue=raw.get("queue"),
        enabled=raw.get("enabled") if raw.get("enabled") is not None else True,
    )


def counts(raw: dict[str, Any]) -> dict[str, int]:
    """A queue's counts under the original's seven names."""
    names = ("waiting", "prioritized", "delayed", "active", "completed", "failed", "paused")
    return {name: raw.get(name) or 0 for name in names}

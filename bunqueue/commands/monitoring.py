"""Monitoring commands: Stats, Metrics, TrimEvents, Prometheus, CompactMemory and the dashboards."""
from __future__ import annotations

import math
from typing import Any

from bunqueue import errors, options
from bunqueue._core.jobfactory import validate_queue_name
from bunqueue.broker.engine import Engine, Session
from bunqueue.errors import CommandError
from bunqueue.monitoring.dashboard import DEFAULT_JOBS_LIMIT

Reply = dict[str, Any]
MAX_SAFE_INTEGER = 2**53 - 1
# Fields that select the queue-scoped form of Metrics (present, even as nil, as the reference reads them).
_QUEUE_METRICS_FIELDS = ("queue", "type")


def handle_stats(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "stats": broker.stats()}


def handle_metrics(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    if any(field in cmd for field in _QUEUE_METRICS_FIELDS):
        return _queue_metrics(broker, cmd)
    return {"ok": True, "metrics": broker.metrics()}


def _queue_metrics(broker: Engine, cmd: dict[str, Any]) -> Reply:
    queue = cmd.get("queue")
    if type(queue) is not str:
        raise CommandError(errors.METRICS_QUEUE_REQUIRED)
    validate_queue_name(queue)
    kind = cmd.get("type")
    if kind != "completed" and kind != "failed":
        raise CommandError(errors.METRICS_TYPE)
    start = _safe_integer(cmd, "start", 0)
    end = -1 if cmd.get("end") == -1 else _safe_integer(cmd, "end", -1)
    return {"ok": True, "data": broker.queue_metrics(queue, kind == "completed", start, end)}


def _safe_integer(cmd: dict[str, Any], field: str, default: int) -> int:
    """A non-negative safe integer argument (an integral float counts), or ``default`` when absent."""
    value = cmd.get(field)
    if value is None:
        return default
    if (
        type(value) is bool
        or not isinstance(value, (int, float))
        or (type(value) is float and (not math.isfinite(value) or not value.is_integer()))
        or not 0 <= value <= MAX_SAFE_INTEGER
    ):
        raise CommandError(errors.non_negative_safe_integer(field))
    return int(value)


def handle_trim_events(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    if cmd.get("maxLength") is None:
        raise CommandError(errors.non_negative_safe_integer("maxLength"))
    max_length = _safe_integer(cmd, "maxLength", 0)
    return {"ok": True, "data": {"removed": broker.trim_events(queue, max_length)}}


def handle_prometheus(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "data": {"metrics": broker.prometheus_text()}}


def handle_compact_memory(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.compact_memory()
    return {"ok": True}


def handle_dashboard_overview(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "data": broker.dashboard_overview()}


def handle_dashboard_queues(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "data": broker.dashboard_queues()}


def handle_dashboard_queue(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    include_jobs = options.flag_or(cmd, "includeJobs", False)
    limit = options.count_arg(cmd, "jobsLimit", DEFAULT_JOBS_LIMIT, finite=True)
    return {"ok": True, "data": broker.dashboard_queue(queue, include_jobs, int(limit))}

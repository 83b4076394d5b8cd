"""DLQ commands: Dlq, GetDlqStats, RetryDlq, PurgeDlq, RemoveDlqJob, RetryCompleted, Set/GetDlqConfig."""
from __future__ import annotations

import math
from typing import Any

from bunqueue import errors, options
from bunqueue.broker.engine import Engine, Entry, Session
from bunqueue.errors import CommandError

Reply = dict[str, Any]
CONFIG_NUMBERS = ("autoRetryInterval", "maxAutoRetries", "maxAge", "maxEntries")


def _dlq_filter(cmd: dict[str, Any]) -> dict[str, Any] | None:
    """The ``filter`` object, checked field by field (errors name ``filter.<field>``)."""
    spec = cmd.get("filter")
    if spec is None:
        return None
    if type(spec) is not dict:
        raise CommandError(errors.must_be_object("filter"))
    named = {f"filter.{key}": value for key, value in spec.items() if type(key) is str}
    reason = named.get("filter.reason")
    if reason is not None and type(reason) is not str:
        raise CommandError(errors.must_be_string("filter.reason"))
    out: dict[str, Any] = {"reason": reason}
    for key in ("olderThan", "newerThan"):
        out[key] = options.number_arg(named, f"filter.{key}", finite=False)
    for key in ("limit", "offset"):
        out[key] = options.number_arg(named, f"filter.{key}")
    for key in ("retriable", "expired"):
        out[key] = options.flag(named, f"filter.{key}")
    return out


def _cap(entries: list[Entry], count: float) -> list[Entry]:
    return entries if count == math.inf else entries[: int(count)]


def handle_dlq(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    spec = _dlq_filter(cmd)
    count = options.count_arg(cmd, "count")
    entries = _cap(broker.dlq_entries(queue, spec), count)
    return {"ok": True, "jobs": [entry["job"] for entry in entries], "entries": entries}


def handle_get_dlq_stats(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    return {"ok": True, "data": {"stats": broker.dlq_stats(queue)}}


def handle_retry_dlq(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    job_id = options.optional_id(cmd, "jobId")
    count = options.count_arg(cmd, "count")
    spec = _dlq_filter(cmd)
    if job_id is not None and spec is None:
        entry = broker.dlq_entry(job_id)
        entries = [] if entry is None or entry["job"].queue != queue else [entry]
    else:
        entries = broker.dlq_entries(queue, spec)
        if job_id is not None:
            entries = [entry for entry in entries if entry["job"].id == job_id]
    retried = broker.retry_dlq_entries(_cap(entries, count), broker.clock(), job_id)
    return {"ok": True, "count": retried}


def handle_purge_dlq(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "count": broker.purge_dlq(options.queue_name(cmd))}


def handle_remove_dlq_job(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    job_id = options.required_string(cmd, "jobId")
    return {"ok": True, "data": {"removed": broker.remove_dlq_entry(queue, job_id)}}


def handle_retry_completed(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    job_id = options.optional_id(cmd, "id")
    limit = options.count_arg(cmd, "count")
    cutoff = options.number_arg(cmd, "timestamp", math.inf, finite=False)
    assert cutoff is not None
    retried = broker.retry_completed(queue, job_id, limit, cutoff, broker.clock())
    return {"ok": True, "count": retried}


def _config_changes(cmd: dict[str, Any]) -> dict[str, Any]:
    """SetDlqConfig's ``config``: numeric fields read as JS ``Number()`` would, unusable ones dropped."""
    config = cmd.get("config")
    if type(config) is not dict:
        raise CommandError(errors.must_be_object("config"))
    changes = dict(config)
    for key in CONFIG_NUMBERS:
        if key not in changes or changes[key] is None:
            continue
        value = changes[key]
        if type(value) is str:
            value = options.js_number(value)
        elif type(value) is bool:
            value = float(value)
        elif type(value) not in (int, float):
            value = math.nan
        if math.isfinite(value):
            changes[key] = value
        else:
            del changes[key]
    return changes


def handle_set_dlq_config(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    broker.set_dlq_config(queue, _config_changes(cmd))
    return {"ok": True}


def handle_get_dlq_config(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    return {"ok": True, "config": broker.dlq_config(queue)}

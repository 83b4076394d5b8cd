"""Job options: the Python keyword names of the client and the wire fields they become.

One table maps every option; ``job_fields`` validates and converts in one place for PUSH, PUSHB, PUSHF
and schedulers.
"""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# keyword -> wire field (PUSH; PUSHB and PUSHF take the same names, except jobId, see ``bulk_entry``).
JOB_OPTIONS: dict[str, str] = {
    "priority": "priority",
    "delay": "delay",
    "attempts": "maxAttempts",
    "backoff": "backoff",
    "ttl": "ttl",
    "timeout": "timeout",
    "job_id": "jobId",
    "unique_key": "uniqueKey",
    "depends_on": "dependsOn",
    "parent_id": "parentId",
    "children_ids": "childrenIds",
    "tags": "tags",
    "group_id": "groupId",
    "lifo": "lifo",
    "remove_on_complete": "removeOnComplete",
    "remove_on_fail": "removeOnFail",
    "stall_timeout": "stallTimeout",
    "durable": "durable",
    "repeat": "repeat",
    "stack_trace_limit": "stackTraceLimit",
    "keep_logs": "keepLogs",
    "size_limit": "sizeLimit",
    "timestamp": "timestamp",
    "fail_parent_on_failure": "failParentOnFailure",
    "remove_dependency_on_failure": "removeDependencyOnFailure",
    "ignore_dependency_on_failure": "ignoreDependencyOnFailure",
    "continue_parent_on_failure": "continueParentOnFailure",
}
# Options that are objects of their own on the Python side.
COMPOSITE_OPTIONS = ("deduplication", "debounce")
_LISTS = ("dependsOn", "childrenIds", "tags")

# A scheduler template's options that the server reads for the jobs it spawns (CronJobOptions).
CRON_JOB_OPTIONS: dict[str, str] = {
    "attempts": "maxAttempts",
    "backoff": "backoff",
    "timeout": "timeout",
    "delay": "delay",
    "stall_timeout": "stallTimeout",
}
CRON_BOOL_OPTIONS: dict[str, str] = {"remove_on_complete": "removeOnComplete", "remove_on_fail": "removeOnFail"}


def compact(command: Mapping[str, Any]) -> dict[str, Any]:
    """``command`` without its None values: an absent option is left to the server's default."""
    return {k: v for k, v in command.items() if v is not None}


def job_fields(options: Mapping[str, Any]) -> dict[str, Any]:
    """The wire fields of a job's keyword options; an unknown keyword is a TypeError, as in a call."""
    out: dict[str, Any] = {}
    for key, value in options.items():
        if value is None:
            continue
        field = JOB_OPTIONS.get(key)
        if field is not None:
            out[field] = list(value) if field in _LISTS else value
        elif key == "deduplication":
            dedup = compact({"ttl": value.get("ttl"), "extend": value.get("extend"), "replace": value.get("replace")})
            out.setdefault("uniqueKey", value.get("id"))
            if dedup:
                out["dedup"] = dedup
        elif key == "debounce":
            out.update(compact({"debounceId": value.get("id"), "debounceTtl": value.get("ttl")}))
        else:
            raise TypeError(f"unknown job option {key!r}")
    if out.get("uniqueKey") is None:
        out.pop("uniqueKey", None)
    if not out.get("dependsOn"):
        out.pop("dependsOn", None)
    return out


def bulk_entry(options: Mapping[str, Any]) -> dict[str, Any]:
    """``job_fields`` for one PUSHB entry, whose custom id field is ``customId``."""
    fields = job_fields(options)
    if "jobId" in fields:
        fields["customId"] = fields.pop("jobId")
    return fields


def legacy_envelope(name: str, data: Any) -> dict[str, Any]:
    """The published SDK's payload: the name inside ``data`` (a non-dict value under ``payload``); the
    broker lifts the name out again, as the Bun original does."""
    if data is None:
        return {"name": name}
    if isinstance(data, dict):
        return {"name": name, **data}
    return {"name": name, "payload": data}


def cron_job_options(opts: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A scheduler template's job options as the wire's ``jobOptions``; None when none applies."""
    if not opts:
        return None
    out = {wire: opts[key] for key, wire in CRON_JOB_OPTIONS.items() if opts.get(key) is not None}
    out.update({wire: opts[key] for key, wire in CRON_BOOL_OPTIONS.items() if isinstance(opts.get(key), bool)})
    return out or None


def scheduler_command(queue: str, scheduler_id: str, repeat: Mapping[str, Any],
                      template: Mapping[str, Any] | None, payload: Mapping[str, Any]) -> dict[str, Any]:
    """The Cron command of ``upsert_job_scheduler``; ``payload`` carries the template's name and data as
    the calling API sends them (``jobName`` and ``data``, or the legacy envelope)."""
    opts = (template or {}).get("opts") or {}
    dedup = opts.get("deduplication") or {}
    dedup_fields = compact({"ttl": dedup.get("ttl"), "extend": dedup.get("extend"), "replace": dedup.get("replace")})
    return compact({
        "cmd": "Cron",
        "name": scheduler_id,
        "queue": queue,
        **payload,
        "schedule": repeat.get("pattern"),
        "repeatEvery": repeat.get("every"),
        "priority": opts.get("priority"),
        "timezone": repeat.get("tz"),
        "immediately": repeat.get("immediately"),
        "maxLimit": repeat.get("limit"),
        # Priority and deduplication of the spawned jobs are top-level Cron fields, not jobOptions.
        "uniqueKey": opts.get("unique_key") or dedup.get("id"),
        "dedup": dedup_fields or None,
        "skipIfNoWorker": repeat.get("skip_if_no_worker"),
        "skipMissedOnRestart": repeat.get("skip_missed_on_restart"),
        "preventOverlap": repeat.get("prevent_overlap"),
        "jobOptions": cron_job_options(opts),
    })

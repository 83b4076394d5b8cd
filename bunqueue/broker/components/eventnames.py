"""The names of the events a stream subscribes to, and the exact set ``Subscribe`` accepts.

A stream names a job event ``job:<type>`` (see ``server.http.streams``); the broker's system events are
named here. ``SUBSCRIBABLE`` is the original's fixed set of names and patterns: a name outside it is
refused, whether or not any event carries it, and a pattern is only ``*`` or ``<family>:*``.
"""
from __future__ import annotations

from collections.abc import Container

JOB_PRIORITY_CHANGED = "job:priority-changed"
JOB_DATA_UPDATED = "job:data-updated"
JOB_DELAY_CHANGED = "job:delay-changed"
JOB_MOVED_TO_DELAYED = "job:moved-to-delayed"
JOB_TIMEOUT = "job:timeout"
JOB_LOCK_EXPIRED = "job:lock-expired"
JOB_EXPIRED = "job:expired"
JOB_DEDUPLICATED = "job:deduplicated"
JOB_DEPENDENCIES_RESOLVED = "job:dependencies-resolved"
QUEUE_DRAINED = "queue:drained"
QUEUE_CLEANED = "queue:cleaned"
QUEUE_OBLITERATED = "queue:obliterated"
QUEUE_REMOVED = "queue:removed"
DLQ_ADDED = "dlq:added"
DLQ_RETRIED = "dlq:retried"
DLQ_RETRY_ALL = "dlq:retry-all"
DLQ_PURGED = "dlq:purged"
DLQ_AUTO_RETRIED = "dlq:auto-retried"
DLQ_EXPIRED = "dlq:expired"
FLOW_FAILED = "flow:failed"
FLOW_COMPLETED = "flow:completed"
FLOW_PUSHED = "flow:pushed"
CRON_CREATED = "cron:created"
CRON_UPDATED = "cron:updated"
CRON_DELETED = "cron:deleted"
CRON_FIRED = "cron:fired"
CRON_SKIPPED = "cron:skipped"
CRON_MISSED = "cron:missed"
WORKER_CONNECTED = "worker:connected"
WORKER_DISCONNECTED = "worker:disconnected"
WORKER_HEARTBEAT = "worker:heartbeat"
WORKER_REMOVED_STALE = "worker:removed-stale"
RATELIMIT_SET = "ratelimit:set"
RATELIMIT_CLEARED = "ratelimit:cleared"
CONCURRENCY_SET = "concurrency:set"
CONCURRENCY_CLEARED = "concurrency:cleared"
RATELIMIT_HIT = "ratelimit:hit"
RATELIMIT_REJECTED = "ratelimit:rejected"
CONCURRENCY_REJECTED = "concurrency:rejected"
AUTH_FAILED = "auth:failed"
SERVER_STARTED = "server:started"
SERVER_SHUTDOWN = "server:shutdown"
SERVER_RECOVERED = "server:recovered"
MEMORY_COMPACTED = "memory:compacted"
WEBHOOK_ADDED = "webhook:added"
WEBHOOK_REMOVED = "webhook:removed"
WEBHOOK_ENABLED = "webhook:enabled"
WEBHOOK_DISABLED = "webhook:disabled"
WEBHOOK_FIRED = "webhook:fired"
WEBHOOK_FAILED = "webhook:failed"
CONFIG_STALL_CHANGED = "config:stall-changed"
CONFIG_DLQ_CHANGED = "config:dlq-changed"
BATCH_PUSHED = "batch:pushed"
BATCH_PULLED = "batch:pulled"
STATS_SNAPSHOT = "stats:snapshot"
HEALTH_STATUS = "health:status"
STORAGE_STATUS = "storage:status"

ALL = "*"
SUBSCRIBABLE = frozenset((
    ALL,
    "job:pushed", "job:active", "job:completed", "job:failed", "job:removed", "job:promoted", "job:progress",
    "job:delayed", "job:stalled", "job:retried", "job:discarded", JOB_PRIORITY_CHANGED, JOB_DATA_UPDATED,
    JOB_DELAY_CHANGED, JOB_TIMEOUT, JOB_LOCK_EXPIRED, "job:deduplicated", "job:waiting-children",
    "job:dependencies-resolved", JOB_MOVED_TO_DELAYED, "job:expired", "job:*",
    "queue:created", QUEUE_REMOVED, "queue:paused", "queue:resumed", QUEUE_DRAINED, QUEUE_CLEANED,
    QUEUE_OBLITERATED, "queue:counts", "queue:idle", "queue:threshold", "queue:*",
    DLQ_ADDED, DLQ_RETRIED, DLQ_RETRY_ALL, DLQ_PURGED, DLQ_AUTO_RETRIED, DLQ_EXPIRED, "dlq:*",
    "flow:completed", FLOW_FAILED, "flow:*",
    CRON_CREATED, CRON_UPDATED, CRON_DELETED, CRON_FIRED, CRON_MISSED, CRON_SKIPPED, "cron:*",
    WORKER_CONNECTED, WORKER_DISCONNECTED, WORKER_HEARTBEAT, "worker:idle", "worker:removed-stale",
    "worker:overloaded", "worker:error", "worker:*",
    RATELIMIT_SET, RATELIMIT_CLEARED, "ratelimit:hit", "ratelimit:rejected",
    CONCURRENCY_SET, CONCURRENCY_CLEARED, "concurrency:rejected", "ratelimit:*", "concurrency:*",
    WEBHOOK_ADDED, WEBHOOK_REMOVED, WEBHOOK_FIRED, WEBHOOK_FAILED, WEBHOOK_ENABLED, WEBHOOK_DISABLED, "webhook:*",
    BATCH_PUSHED, BATCH_PULLED, "batch:*",
    "client:connected", "client:disconnected", "client:*",
    "auth:failed", "auth:*",
    "cleanup:orphans-removed", "cleanup:stale-deps-removed", "cleanup:*",
    HEALTH_STATUS, "health:*",
    STATS_SNAPSHOT, "stats:*",
    STORAGE_STATUS, "storage:backup-started", "storage:backup-completed", "storage:backup-failed",
    "storage:size-warning", "storage:*",
    "server:started", "server:shutdown", "server:recovered", "server:memory-warning", "server:*",
    "memory:compacted", "memory:*",
    CONFIG_STALL_CHANGED, CONFIG_DLQ_CHANGED, "config:*",
))


def family_pattern(name: str) -> str:
    """The ``<family>:*`` pattern that covers ``name``."""
    return name.split(":", 1)[0] + ":*"


def matches(name: str, subscriptions: Container[str]) -> bool:
    return ALL in subscriptions or name in subscriptions or family_pattern(name) in subscriptions

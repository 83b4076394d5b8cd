"""Commands: the one table from command names to handlers, one module per command family.

Each module reads a family's requests (options are checked in ``bunqueue.broker.options``) and calls
the broker module of the same name (``commands.dlq`` -> ``broker.dlq``...; ``commands.jobs`` -> the
``Broker`` facade itself). A handler takes (broker, request, session) and returns a reply dict, or an
awaitable of one when the command has to wait (long-poll pulls). Handlers raise ``CommandError`` for
``{ok: false, error}``.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bunqueue.broker.broker import Broker
from bunqueue.broker.session import Session
from bunqueue.commands import (
    cleanup,
    dedup,
    dlq,
    events,
    jobcontrol,
    jobs,
    limits,
    listing,
    locks,
    logs,
    monitoring,
    queries,
    queuecontrol,
    system,
    webhooks,
    workers,
)
from bunqueue.monitoring.timing import timed

Handler = Callable[[Broker, dict[str, Any], Session], "dict[str, Any] | Awaitable[dict[str, Any]]"]

HANDLERS: dict[str, Handler] = {
    "Hello": system.handle_hello,
    "Ping": system.handle_ping,
    "StorageStatus": system.handle_storage_status,
    "PUSH": timed(jobs.handle_push, "push"),
    "PUSHB": timed(jobs.handle_pushb, "push"),
    "PULL": timed(jobs.handle_pull, "pull"),
    "PULLB": timed(jobs.handle_pullb, "pull"),
    "ACK": timed(jobs.handle_ack, "ack"),
    "ACKB": timed(jobs.handle_ackb, "ack"),
    "FAIL": jobs.handle_fail,
    "GetJob": queries.handle_get_job,
    "GetJobByCustomId": queries.handle_get_job_by_custom_id,
    "GetState": queries.handle_get_state,
    "GetResult": queries.handle_get_result,
    "GetJobCounts": queries.handle_get_job_counts,
    "Count": queries.handle_count,
    "GetJobs": listing.handle_get_jobs,
    "GetCountsPerPriority": listing.handle_get_counts_per_priority,
    "GetProgress": jobcontrol.handle_get_progress,
    "ListQueues": listing.handle_list_queues,
    "Pause": queuecontrol.handle_pause,
    "Resume": queuecontrol.handle_resume,
    "IsPaused": queuecontrol.handle_is_paused,
    "SubscribeEvents": events.handle_subscribe_events,
    "UnsubscribeEvents": events.handle_unsubscribe_events,
    "Drain": cleanup.handle_drain,
    "Obliterate": cleanup.handle_obliterate,
    "Clean": cleanup.handle_clean,
    "Cancel": jobcontrol.handle_cancel,
    "Progress": jobcontrol.handle_progress,
    "Update": jobcontrol.handle_update,
    "ChangePriority": jobcontrol.handle_change_priority,
    "Promote": jobcontrol.handle_promote,
    "PromoteJobs": jobcontrol.handle_promote_jobs,
    "MoveToDelayed": jobcontrol.handle_move_to_delayed,
    "ChangeDelay": jobcontrol.handle_change_delay,
    "MoveToWait": jobcontrol.handle_move_to_wait,
    "Discard": jobcontrol.handle_discard,
    "WaitJob": jobcontrol.handle_wait_job,
    "Dlq": dlq.handle_dlq,
    "GetDlqStats": dlq.handle_get_dlq_stats,
    "RetryDlq": dlq.handle_retry_dlq,
    "PurgeDlq": dlq.handle_purge_dlq,
    "RemoveDlqJob": dlq.handle_remove_dlq_job,
    "RetryCompleted": dlq.handle_retry_completed,
    "SetDlqConfig": dlq.handle_set_dlq_config,
    "GetDlqConfig": dlq.handle_get_dlq_config,
    "AddLog": logs.handle_add_log,
    "GetLogs": logs.handle_get_logs,
    "ClearLogs": logs.handle_clear_logs,
    "ExtendLock": locks.handle_extend_lock,
    "ExtendLocks": locks.handle_extend_locks,
    "JobHeartbeat": locks.handle_job_heartbeat,
    "JobHeartbeatB": locks.handle_job_heartbeat_batch,
    "RateLimit": limits.handle_rate_limit,
    "RateLimitClear": limits.handle_rate_limit_clear,
    "SetConcurrency": limits.handle_set_concurrency,
    "ClearConcurrency": limits.handle_clear_concurrency,
    "GetQueueLimits": limits.handle_get_queue_limits,
    "SetStallConfig": limits.handle_set_stall_config,
    "GetStallConfig": limits.handle_get_stall_config,
    "GetDeduplicationJobId": dedup.handle_get_deduplication_job_id,
    "RemoveDeduplicationKey": dedup.handle_remove_deduplication_key,
    "RemoveJobDeduplicationKey": dedup.handle_remove_job_deduplication_key,
    "RegisterWorker": workers.handle_register_worker,
    "UnregisterWorker": workers.handle_unregister_worker,
    "ListWorkers": workers.handle_list_workers,
    "Heartbeat": workers.handle_heartbeat,
    "Stats": monitoring.handle_stats,
    "Metrics": monitoring.handle_metrics,
    "TrimEvents": monitoring.handle_trim_events,
    "Prometheus": monitoring.handle_prometheus,
    "CompactMemory": monitoring.handle_compact_memory,
    "DashboardOverview": monitoring.handle_dashboard_overview,
    "DashboardQueues": monitoring.handle_dashboard_queues,
    "DashboardQueue": monitoring.handle_dashboard_queue,
    "AddWebhook": webhooks.handle_add_webhook,
    "RemoveWebhook": webhooks.handle_remove_webhook,
    "ListWebhooks": webhooks.handle_list_webhooks,
    "SetWebhookEnabled": webhooks.handle_set_webhook_enabled,
}

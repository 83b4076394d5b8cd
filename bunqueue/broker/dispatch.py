"""The one table from command names to handlers.

A handler takes (broker, request, session) and returns a reply dict, or an awaitable of one when the
command has to wait (long-poll pulls). Handlers raise ``CommandError`` for ``{ok: false, error}``.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bunqueue.broker.broker import Broker
from bunqueue.broker.handlers import (
    control,
    dedup,
    dlq,
    jobs,
    limits,
    listing,
    locks,
    logs,
    manage,
    queries,
    queues,
    system,
    workers,
)
from bunqueue.broker.session import Session

Handler = Callable[[Broker, dict[str, Any], Session], "dict[str, Any] | Awaitable[dict[str, Any]]"]

HANDLERS: dict[str, Handler] = {
    "Hello": system.handle_hello,
    "Ping": system.handle_ping,
    "StorageStatus": system.handle_storage_status,
    "PUSH": jobs.handle_push,
    "PUSHB": jobs.handle_pushb,
    "PULL": jobs.handle_pull,
    "PULLB": jobs.handle_pullb,
    "ACK": jobs.handle_ack,
    "ACKB": jobs.handle_ackb,
    "FAIL": jobs.handle_fail,
    "GetJob": queries.handle_get_job,
    "GetJobByCustomId": queries.handle_get_job_by_custom_id,
    "GetState": queries.handle_get_state,
    "GetResult": queries.handle_get_result,
    "GetJobCounts": queries.handle_get_job_counts,
    "Count": queries.handle_count,
    "GetJobs": listing.handle_get_jobs,
    "GetCountsPerPriority": listing.handle_get_counts_per_priority,
    "GetProgress": manage.handle_get_progress,
    "ListQueues": listing.handle_list_queues,
    "Pause": control.handle_pause,
    "Resume": control.handle_resume,
    "IsPaused": control.handle_is_paused,
    "Drain": queues.handle_drain,
    "Obliterate": queues.handle_obliterate,
    "Clean": queues.handle_clean,
    "Cancel": manage.handle_cancel,
    "Progress": manage.handle_progress,
    "Update": manage.handle_update,
    "ChangePriority": manage.handle_change_priority,
    "Promote": manage.handle_promote,
    "PromoteJobs": manage.handle_promote_jobs,
    "MoveToDelayed": manage.handle_move_to_delayed,
    "ChangeDelay": manage.handle_change_delay,
    "MoveToWait": manage.handle_move_to_wait,
    "Discard": manage.handle_discard,
    "WaitJob": manage.handle_wait_job,
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
}

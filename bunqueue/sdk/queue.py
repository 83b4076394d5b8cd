"""The synchronous Queue: the asyncio Queue's methods as blocking calls, sending what the published SDK
sends (the job name inside ``data``)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bunqueue.asyncio import queue as aio
from bunqueue.client.connectionoptions import DEFAULT_PORT, TlsOption
from bunqueue.client.options import legacy_envelope
from bunqueue.sdk.blocking import blocking
from bunqueue.sdk.job import Job
from bunqueue.sdk.sharedconnection import Connection, shared_transport
from bunqueue.sdk.telemetry import TelemetryHandler


class SdkQueue(aio.Queue):
    """The asyncio Queue with the published SDK's payloads and synchronous Jobs."""

    def _job(self, raw: dict[str, Any]) -> Job:  # type: ignore[override]
        return Job(raw, self.transport)

    def _named(self, name: str, data: Any) -> dict[str, Any]:
        return {"data": legacy_envelope(name, data)}

    def _scheduled(self, name: str, data: Any) -> dict[str, Any]:
        return {"data": legacy_envelope(name, data)}


def _jobs(method: Callable[..., Any]) -> Callable[..., Any]:
    """``blocking`` for the methods that answer Jobs (synchronous ones, made by ``SdkQueue._job``)."""
    return blocking(method)


class Queue:
    """Producer and management client of one queue. ``embedded=True`` uses a broker in this process."""

    def __init__(
        self,
        name: str,
        host: str = "localhost",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        tls: TlsOption = None,
        connection: Connection | None = None,
        command_timeout: float = 10.0,
        prefix_key: str = "",
        on_telemetry: TelemetryHandler | None = None,
        *,
        embedded: bool = False,
        data_path: str | None = None,
        pool_size: int = 1,
    ) -> None:
        self._aio = SdkQueue(
            name, host, port, token, tls, shared_transport(connection),
            command_timeout, prefix_key, embedded=embedded, data_path=data_path, pool_size=pool_size,
            on_telemetry=on_telemetry,
        )
        self.connection = connection or Connection.over(self._aio.transport)
        self.name = self._aio.name

    add: Callable[..., Job] = _jobs(aio.Queue.add)
    get_job: Callable[..., Job | None] = _jobs(aio.Queue.get_job)
    get_job_by_custom_id: Callable[..., Job | None] = _jobs(aio.Queue.get_job_by_custom_id)
    get_jobs: Callable[..., list[Job]] = _jobs(aio.Queue.get_jobs)
    get_waiting: Callable[..., list[Job]] = _jobs(aio.Queue.get_waiting)
    get_delayed: Callable[..., list[Job]] = _jobs(aio.Queue.get_delayed)
    get_active: Callable[..., list[Job]] = _jobs(aio.Queue.get_active)
    get_completed: Callable[..., list[Job]] = _jobs(aio.Queue.get_completed)
    get_failed: Callable[..., list[Job]] = _jobs(aio.Queue.get_failed)
    get_prioritized: Callable[..., list[Job]] = _jobs(aio.Queue.get_prioritized)
    get_waiting_children: Callable[..., list[Job]] = _jobs(aio.Queue.get_waiting_children)

    add_bulk = blocking(aio.Queue.add_bulk)
    pause = blocking(aio.Queue.pause)
    resume = blocking(aio.Queue.resume)
    is_paused = blocking(aio.Queue.is_paused)
    drain = blocking(aio.Queue.drain)
    obliterate = blocking(aio.Queue.obliterate)
    clean = blocking(aio.Queue.clean)
    remove = blocking(aio.Queue.remove)
    cancel = blocking(aio.Queue.cancel)
    discard = blocking(aio.Queue.discard)
    promote_job = blocking(aio.Queue.promote_job)
    promote_jobs = blocking(aio.Queue.promote_jobs)
    retry_job = blocking(aio.Queue.retry_job)
    retry_jobs = blocking(aio.Queue.retry_jobs)
    retry_completed = blocking(aio.Queue.retry_completed)
    update_job_progress = blocking(aio.Queue.update_job_progress)
    update_job_data = blocking(aio.Queue.update_job_data)
    change_job_priority = blocking(aio.Queue.change_job_priority)
    change_job_delay = blocking(aio.Queue.change_job_delay)
    move_job_to_wait = blocking(aio.Queue.move_job_to_wait)
    move_job_to_delayed = blocking(aio.Queue.move_job_to_delayed)
    extend_job_lock = blocking(aio.Queue.extend_job_lock)
    move_job_to_completed = blocking(aio.Queue.move_job_to_completed)
    move_job_to_failed = blocking(aio.Queue.move_job_to_failed)
    ping = blocking(aio.Queue.ping)
    wait_until_ready = blocking(aio.Queue.wait_until_ready)
    close = blocking(aio.Queue.close)
    disconnect = blocking(aio.Queue.disconnect)

    # Queries.
    get_state = blocking(aio.Queue.get_state)
    get_result = blocking(aio.Queue.get_result)
    get_progress = blocking(aio.Queue.get_progress)
    wait_for_job = blocking(aio.Queue.wait_for_job)
    wait_job_until_finished = blocking(aio.Queue.wait_job_until_finished)
    get_children_values = blocking(aio.Queue.get_children_values)
    get_failed_children_values = blocking(aio.Queue.get_failed_children_values)
    get_ignored_children_failures = blocking(aio.Queue.get_ignored_children_failures)
    remove_child_dependency = blocking(aio.Queue.remove_child_dependency)
    remove_unprocessed_children = blocking(aio.Queue.remove_unprocessed_children)
    get_deduplication_job_id = blocking(aio.Queue.get_deduplication_job_id)
    get_job_counts = blocking(aio.Queue.get_job_counts)
    get_waiting_count = blocking(aio.Queue.get_waiting_count)
    get_active_count = blocking(aio.Queue.get_active_count)
    get_completed_count = blocking(aio.Queue.get_completed_count)
    get_failed_count = blocking(aio.Queue.get_failed_count)
    get_delayed_count = blocking(aio.Queue.get_delayed_count)
    get_prioritized_count = blocking(aio.Queue.get_prioritized_count)
    get_waiting_children_count = blocking(aio.Queue.get_waiting_children_count)
    count = blocking(aio.Queue.count)
    get_counts_per_priority = blocking(aio.Queue.get_counts_per_priority)
    add_job_log = blocking(aio.Queue.add_job_log)
    get_job_logs = blocking(aio.Queue.get_job_logs)
    clear_job_logs = blocking(aio.Queue.clear_job_logs)

    # Administration.
    get_dlq = blocking(aio.Queue.get_dlq)
    retry_dlq = blocking(aio.Queue.retry_dlq)
    purge_dlq = blocking(aio.Queue.purge_dlq)
    set_dlq_config = blocking(aio.Queue.set_dlq_config)
    get_dlq_config = blocking(aio.Queue.get_dlq_config)
    set_stall_config = blocking(aio.Queue.set_stall_config)
    get_stall_config = blocking(aio.Queue.get_stall_config)
    set_global_rate_limit = blocking(aio.Queue.set_global_rate_limit)
    remove_global_rate_limit = blocking(aio.Queue.remove_global_rate_limit)
    set_global_concurrency = blocking(aio.Queue.set_global_concurrency)
    remove_global_concurrency = blocking(aio.Queue.remove_global_concurrency)
    upsert_job_scheduler = blocking(aio.Queue.upsert_job_scheduler)
    remove_job_scheduler = blocking(aio.Queue.remove_job_scheduler)
    get_job_scheduler = blocking(aio.Queue.get_job_scheduler)
    get_job_schedulers = blocking(aio.Queue.get_job_schedulers)
    get_job_schedulers_count = blocking(aio.Queue.get_job_schedulers_count)
    add_cron = blocking(aio.Queue.add_cron)
    every = blocking(aio.Queue.every)
    add_webhook = blocking(aio.Queue.add_webhook)
    remove_webhook = blocking(aio.Queue.remove_webhook)
    list_webhooks = blocking(aio.Queue.list_webhooks)
    set_webhook_enabled = blocking(aio.Queue.set_webhook_enabled)
    get_workers = blocking(aio.Queue.get_workers)
    get_workers_count = blocking(aio.Queue.get_workers_count)
    get_stats = blocking(aio.Queue.get_stats)
    get_metrics = blocking(aio.Queue.get_metrics)
    list_queues = blocking(aio.Queue.list_queues)

    def __enter__(self) -> Queue:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

"""The facade: ``Broker``, the one object the command layer, the servers and the tests hold.

``Wiring`` builds the components and holds the hot path (push, pull, ack, fail, which go straight to their
transition); the methods below are each command family's operations, named as in ``broker/ops/`` and
grouped as ``commands/`` is. Their contract, written for a second engine to implement, is the ``Engine``
protocol (``bunqueue.broker.engine``); mypy checks that ``Broker`` satisfies it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bunqueue.broker import jobwait, pullwait
from bunqueue.broker.ops import (
    cleanup,
    cron,
    dedup,
    dlq,
    events,
    flows,
    groups,
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
from bunqueue.broker.wiring import Wiring

if TYPE_CHECKING:
    from bunqueue.broker.engine import Engine


class Broker(Wiring):
    # Every answer is ready when its call returns: the job handlers call the methods below directly.
    awaits_jobs = False

    # -- jobs: PUSH, PUSHB, PULL, PULLB, ACK, ACKB, FAIL (push, push_many, queue, pull, active_job, ack and
    # fail are Wiring's) and the outcomes that lost a race with a timeout, a lease or a stall
    pull_later = pullwait.wait_for_jobs
    late_ack = jobs.late_ack
    late_fail = jobs.late_fail
    ack_batch = jobs.ack_batch

    # -- queries (find_job, find_result and promote_due are Wiring's)
    job_counts = queries.job_counts
    count_queued = queries.count_queued
    job_by_custom_id = queries.job_by_custom_id

    # -- flows
    prepare_graph = flows.prepare_graph
    commit_graph = flows.commit_graph
    publish_graph = flows.publish_graph
    abandon_graph = flows.abandon_graph
    update_parent = flows.update_parent
    children_values = flows.children_values
    remove_child_dependency = flows.remove_child_dependency
    remove_unprocessed_children = flows.remove_unprocessed_children
    move_to_waiting_children = flows.move_to_waiting_children
    failed_children_values = flows.failed_children_values
    ignored_children_failures = flows.ignored_children_failures

    # -- jobcontrol
    cancel = jobcontrol.cancel
    update_data = jobcontrol.update_data
    change_priority = jobcontrol.change_priority
    promote = jobcontrol.promote
    promote_jobs = jobcontrol.promote_jobs
    change_delay = jobcontrol.change_delay
    move_to_delayed = jobcontrol.move_to_delayed
    move_to_wait = jobcontrol.move_to_wait
    discard = jobcontrol.discard
    update_progress = jobcontrol.update_progress
    running_job = jobcontrol.active_job

    def wait_job(self, job_id: Any, timeout_ms: float) -> dict[str, Any] | Any:
        return jobwait.wait_for_job(self.records, job_id, timeout_ms)

    # -- listing
    jobs_page = listing.jobs_page
    counts_per_priority = listing.counts_per_priority
    list_queues = listing.list_queues

    # -- queuecontrol
    pause = queuecontrol.pause
    resume = queuecontrol.resume
    is_paused = queuecontrol.is_paused

    # -- cleanup
    drain = cleanup.drain
    obliterate = cleanup.obliterate
    clean = cleanup.clean

    # -- dlq
    dlq_entries = dlq.entries
    dlq_entry = dlq.entry
    dlq_stats = dlq.stats
    dlq_config = dlq.config
    retry_dlq_entries = dlq.retry_entries
    purge_dlq = dlq.purge
    remove_dlq_entry = dlq.remove_entry
    set_dlq_config = dlq.set_config
    retry_completed = dlq.retry_completed

    # -- logs
    add_log = logs.add_log
    get_logs_page = logs.get_logs_page
    clear_logs = logs.clear_logs

    # -- locks
    extend_lock = locks.extend_lock
    extend_locks = locks.extend_locks
    job_heartbeat = locks.job_heartbeat
    job_heartbeats = locks.job_heartbeats

    # -- limits
    set_rate_limit = limits.set_rate_limit
    clear_rate_limit = limits.clear_rate_limit
    set_concurrency = limits.set_concurrency
    clear_concurrency = limits.clear_concurrency
    queue_limits = limits.queue_limits
    set_stall_config = limits.set_stall_config
    stall_config = limits.stall_config

    # -- dedup
    dedup_owner = dedup.dedup_owner
    remove_dedup_key = dedup.remove_dedup_key
    remove_job_dedup_key = dedup.remove_job_dedup_key

    # -- groups
    group_jobs_count = groups.group_jobs_count
    groups_count = groups.groups_count
    group_active_count = groups.group_active_count
    set_group_rate_limit = groups.set_group_rate_limit
    group_rate_limit = groups.group_rate_limit
    remove_group_rate_limit = groups.remove_group_rate_limit
    group_rate_limit_ttl = groups.group_rate_limit_ttl
    set_group_concurrency = groups.set_group_concurrency
    group_concurrency = groups.group_concurrency
    remove_group_concurrency = groups.remove_group_concurrency
    pause_group = groups.pause_group
    resume_group = groups.resume_group
    is_group_paused = groups.is_group_paused
    rate_limit_group = groups.rate_limit_group

    # -- workers
    register_worker = workers.register_worker
    unregister_worker = workers.unregister_worker
    list_workers = workers.list_workers
    worker_heartbeat = workers.worker_heartbeat

    # -- cron
    upsert_cron = cron.upsert_cron
    remove_cron = cron.remove_cron
    list_crons = cron.list_crons
    cron_view = cron.cron_view

    # -- events
    subscribe_events = events.subscribe_events
    unsubscribe_events = events.unsubscribe_events
    listen_all = events.listen_all
    unlisten_all = events.unlisten_all
    hears_system_events = events.hears_system_events
    system_event = events.system_event

    # -- webhooks
    check_webhook = webhooks.check_webhook
    add_webhook = webhooks.add_webhook
    remove_webhook = webhooks.remove_webhook
    list_webhooks = webhooks.list_webhooks
    has_webhook = webhooks.has_webhook
    set_webhook_enabled = webhooks.set_webhook_enabled

    # -- monitoring
    totals = monitoring.totals
    stats = monitoring.stats
    metrics = monitoring.metrics
    queue_metrics = monitoring.queue_metrics
    trim_events = monitoring.trim_events
    prometheus_text = monitoring.prometheus_text
    compact_memory = monitoring.compact_memory
    dashboard_overview = monitoring.dashboard_overview
    stats_snapshot = monitoring.stats_snapshot
    health_snapshot = monitoring.health_snapshot
    storage_snapshot = monitoring.storage_snapshot
    dashboard_queues = monitoring.dashboard_queues
    dashboard_queue = monitoring.dashboard_queue
    connection_opened = monitoring.connection_opened
    connection_closed = monitoring.connection_closed
    latency_histograms = monitoring.latency_histograms

    # -- system
    storage_status = system.storage_status


if TYPE_CHECKING:

    def _is_an_engine(broker: Broker) -> Engine:
        return broker

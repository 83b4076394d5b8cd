"""The facade: ``Broker``, the one object the command layer, the servers and the tests hold.

``Wiring`` builds the components and holds the hot path (push, pull, ack, fail, which go straight to their
transition); the methods below are each command family's operations, named as in ``broker/ops/`` and
grouped as ``commands/`` is. Their contract, written for a second engine to implement, is the ``Engine``
protocol (``bunqueue.broker.engine``); mypy checks that ``Broker`` satisfies it.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bunqueue.broker import jobwait, pullwait
from bunqueue.broker.ops import cleanup, dlq, flows, jobcontrol, jobs, limits, listing, locks, logs, queuecontrol
from bunqueue.broker.wiring import Wiring

if TYPE_CHECKING:
    from bunqueue.broker.engine import Engine


class Broker(Wiring):
    # -- jobs: PUSH, PUSHB, PULL, PULLB, ACK, ACKB, FAIL (push, push_many, queue, pull, active_job, ack and
    # fail are Wiring's) and the outcomes that lost a race with a timeout, a lease or a stall
    pull_later = pullwait.wait_for_jobs
    late_ack = jobs.late_ack
    late_fail = jobs.late_fail
    ack_batch = jobs.ack_batch

    # -- flows
    prepare_graph = flows.prepare_graph
    publish_graph = flows.publish_graph
    abandon_graph = flows.abandon_graph
    update_parent = flows.update_parent
    children_values = flows.children_values
    remove_child_dependency = flows.remove_child_dependency
    remove_unprocessed_children = flows.remove_unprocessed_children
    move_to_waiting_children = flows.move_to_waiting_children

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
    job_heartbeat = locks.job_heartbeat

    # -- limits
    set_stall_config = limits.set_stall_config
    stall_config = limits.stall_config


if TYPE_CHECKING:

    def _is_an_engine(broker: Broker) -> Engine:
        return broker

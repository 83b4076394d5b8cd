"""Transitions: the only code that moves a job between states, tells the store and emits the event.

::

                         admit                   activate (PULL)
       PUSH ─────────┬─────────────► READY ◄────────────────────┐ ──────────► ACTIVE
                     │   run_at due    ▲  │ enqueue (now)       │              │ │ │
                     ├──► DELAYED ─────┘  │                     │  requeue     │ │ │ complete
                     │                    │                     └──────────────┘ │ └────────► COMPLETED
                     └──► WAITING_CHILDREN (dependencies)       lose_attempt:    │              │ restart
                            │ the last one completes            retry / requeue  │              ▼
                            └──► enqueue                                         │           READY
                                                                    fail_terminally
                                                                     dead_letter │
                                                                                 ▼
                                                                  FAILED (DLQ) ──► restart ──► READY
                                                                                 │
                        remove (cancel, drain, clean, obliterate, ttl, DLQ expiry) ──► gone

    READY/DELAYED ──► WAITING_CHILDREN   hold_for_children (UpdateParent)
    ACTIVE ──► WAITING_CHILDREN          park_active (MoveToWaitingChildren)
    READY/DELAYED/WAITING_CHILDREN/ACTIVE ──► FAILED (DLQ)   discard (Discard, failParentOnFailure)
    READY/DELAYED ──► COMPLETED          complete (a late ACK of an attempt whose job was requeued)
    READY/DELAYED ──► READY/DELAYED      requeue (promote, change delay)

``moves.PREDECESSORS`` is this diagram as data; with ``BUNQUEUE_DEBUG=1`` every assignment checks it.
Nothing else assigns ``Job.state``, but for the compiled admission of plain PUSHB jobs
(``_core/admission.pyx``), the job factory and the store's row decoding (``storage/schema.py``), which set a
first state rather than make a move (``tests/test_module_graph.py`` holds that).

Every way out of ACTIVE goes through ``leave_active`` (lease, holder, counters, stall and timeout checks,
the unique key, a concurrency slot). An attempt that does not end in an ACK is *lost* through one door,
``lose_attempt``, whatever lost it: an explicit FAIL, a job timeout, an expired lease, a confirmed stall,
or a restart that interrupted it. The causes differ only in what they charge and where the job goes; those
differences are written once, in ``lose_attempt`` and its two halves.

``core.TransitionCore`` holds the components transitions touch and makes the moves every path shares
(admission, activation, completion, requeueing, removal); ``failures.Transitions`` adds the paths of an
attempt that does not end in an ACK (``lose_attempt``, retries, the DLQ, the deadline handlers). The
per-job halves of PULL and ACK are compiled: ``activation.activate`` (bound as the broker's ``pull``) and
``completion`` (``leave_active``, ``complete_jobs``), which type the job record and read its fields directly.

Every method runs to completion without yielding, so each transition is atomic with respect to every
other command: the event loop is the lock.
"""
from bunqueue.broker.transitions.core import QUEUED, TransitionCore
from bunqueue.broker.transitions.failures import (
    FAILED,
    INTERRUPTED,
    INTERRUPTED_ERROR,
    LEASE_EXPIRED,
    STALLED,
    TIMED_OUT,
    Transitions,
)

__all__ = [
    "FAILED", "INTERRUPTED", "INTERRUPTED_ERROR", "LEASE_EXPIRED", "QUEUED", "STALLED", "TIMED_OUT", "TransitionCore",
    "Transitions",
]

"""ExtendLock, ExtendLocks, JobHeartbeat and JobHeartbeatB."""
from __future__ import annotations

from typing import Any

from bunqueue import errors, options
from bunqueue.broker.engine import Engine, Session
from bunqueue.errors import CommandError

Reply = dict[str, Any]


def handle_extend_lock(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    # The duration is checked before the lease is looked at: a bad one changes nothing. A numeric string
    # is not a number here (the spec's ExtendLock rule), unlike a PUSH option or a ChangeDelay delay.
    duration = options.number_arg(cmd, "duration")
    if not broker.extend_lock(cmd.get("id"), cmd.get("token"), duration):
        raise CommandError(errors.LOCK_NOT_FOUND)
    return {"ok": True}


def handle_extend_locks(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    ids = options.string_list(cmd, "ids")
    tokens = options.string_list(cmd, "tokens")
    raw_durations = options.string_list(cmd, "durations")
    # Every duration is validated before any lease is extended: one bad entry fails the whole command.
    durations: list[float | None] = []
    for i, value in enumerate(raw_durations):
        try:
            durations.append(options.number_arg({"duration": value}, "duration"))
        except CommandError as exc:
            raise CommandError(errors.item_error("durations", i, exc.message)) from None
    renewals = [
        (job_id, tokens[i] if i < len(tokens) else None, durations[i] if i < len(durations) else None)
        for i, job_id in enumerate(ids)
    ]
    return {"ok": True, "count": broker.extend_locks(renewals, broker.clock())}


def handle_job_heartbeat(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    duration = options.finite_option(cmd, "duration")
    # A zero duration renews by the lease's own ttl, as the reference reads it.
    if not broker.job_heartbeat(cmd.get("id"), cmd.get("token"), duration or None, broker.clock()):
        raise CommandError(errors.JOB_NOT_ACTIVE)
    return {"ok": True, "data": {"ok": True}}


def handle_job_heartbeat_batch(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    ids = options.string_list(cmd, "ids")
    tokens = cmd.get("tokens")
    if tokens is not None and type(tokens) is not list:
        raise CommandError(errors.must_be_array("tokens"))
    beats = [(job_id, tokens[i] if tokens is not None and i < len(tokens) else None) for i, job_id in enumerate(ids)]
    return {"ok": True, "data": {"ok": True, "count": broker.job_heartbeats(beats, broker.clock())}}

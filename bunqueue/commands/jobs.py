"""PUSH, PUSHB, PULL, PULLB, ACK, ACKB, FAIL: request dicts in, response dicts (or a wait) out.

Each handler validates the request, then branches once on ``awaits_jobs``: the memory engine answers at
once; an engine that awaits its job family (``AwaitedJobs``) gets a coroutine the runner awaits, whose
reply has the same shape.
"""
from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, cast

from bunqueue import errors, options
from bunqueue._core.groups import GroupClaim
from bunqueue._core.jobfactory import check_nesting, flag_option, validate_queue_name
from bunqueue._core.jobs import Job
from bunqueue.broker.engine import AwaitedJobs, Engine, QueueState, Session
from bunqueue.errors import CommandError

Reply = dict[str, Any]

# JSON can be at most six times longer than MessagePack (a control character: one byte, six chars), so a
# frame under this size cannot carry job data over the 10 MB JSON limit and skips the measurement.
SIZE_CHECK_FRAME_BYTES = (10 * 1024 * 1024) // 6


def handle_push(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply | Awaitable[Reply]:
    queue = options.queue_name(cmd)
    if broker.awaits_jobs:
        return _push_awaited(cast(AwaitedJobs, broker), queue, cmd, session.frame_size > SIZE_CHECK_FRAME_BYTES)
    job_id = broker.push(queue, cmd, session.frame_size > SIZE_CHECK_FRAME_BYTES)
    return {"ok": True, "id": job_id}


async def _push_awaited(jobs: AwaitedJobs, queue: str, cmd: dict[str, Any], check_size: bool) -> Reply:
    return {"ok": True, "id": await jobs.push_async(queue, cmd, check_size)}


def handle_pushb(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply | Awaitable[Reply]:
    queue = options.queue_name(cmd)
    if broker.awaits_jobs:
        return _pushb_awaited(
            cast(AwaitedJobs, broker), queue, cmd.get("jobs"), session.frame_size > SIZE_CHECK_FRAME_BYTES
        )
    ids = broker.push_many(queue, cmd.get("jobs"), session.frame_size > SIZE_CHECK_FRAME_BYTES)
    return {"ok": True, "ids": ids}


async def _pushb_awaited(jobs: AwaitedJobs, queue: str, items: Any, check_size: bool) -> Reply:
    return {"ok": True, "ids": await jobs.push_many_async(queue, items, check_size)}


def _pull_options(cmd: dict[str, Any], batch: bool) -> tuple[str, int, float, str | None, float, GroupClaim | None]:
    """(queue, count, timeout, owner, lockTtl, group claim), checked in the reference's order: queue,
    count (PULLB), timeout, group, then the lease fields."""
    queue = validate_queue_name(cmd.get("queue"))
    # A PULLB without count pulls one job: the reference accepts the omission.
    count = int(options.strict_number(cmd, "count", 1, 1, options.MAX_PULL_COUNT)) if batch else 1
    timeout = options.strict_number(cmd, "timeout", 0.0, 0, options.MAX_PULL_TIMEOUT)
    # Most pulls name no group: no call to learn that.
    claim = options.group_claim(cmd) if "group" in cmd else None
    owner = options.optional_string(cmd, "owner")
    lock_ttl = options.lock_ttl(cmd) if owner is not None else options.DEFAULT_LOCK_TTL
    return queue, count, timeout, owner, lock_ttl, claim


def handle_pull(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply | Awaitable[Reply]:
    queue, _, timeout, owner, lock_ttl, claim = _pull_options(cmd, False)
    detach = flag_option(cmd, "detach") and owner is None
    if broker.awaits_jobs:
        return _pull_awaited(cast(AwaitedJobs, broker), queue, session, owner, lock_ttl, timeout, claim)
    q = broker.queue(queue)
    jobs, tokens = broker.pull(q, 1, session, owner, lock_ttl, detach, claim)
    if not jobs and timeout > 0:
        return _pull_later(broker, q, session, owner, lock_ttl, detach, timeout, claim)
    return _pull_reply(jobs, tokens)


async def _pull_later(
    broker: Engine, q: QueueState, session: Session, owner: str | None, lock_ttl: float, detach: bool,
    timeout: float, claim: GroupClaim | None,
) -> Reply:
    jobs, tokens = await broker.pull_later(q, 1, session, owner, lock_ttl, detach, timeout, claim)
    return _pull_reply(jobs, tokens)


async def _pull_awaited(
    jobs: AwaitedJobs, queue: str, session: Session, owner: str | None, lock_ttl: float, timeout: float,
    claim: GroupClaim | None,
) -> Reply:
    pulled, tokens = await jobs.pull_async(queue, 1, session, owner, lock_ttl, timeout, claim)
    return _pull_reply(pulled, tokens)


def _pull_reply(jobs: list[Job], tokens: list[str] | None) -> Reply:
    reply: Reply = {"ok": True, "job": jobs[0] if jobs else None}
    if tokens is not None:
        reply["token"] = tokens[0] if tokens else None
    return reply


def handle_pullb(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply | Awaitable[Reply]:
    queue, count, timeout, owner, lock_ttl, claim = _pull_options(cmd, True)
    if broker.awaits_jobs:
        return _pullb_awaited(cast(AwaitedJobs, broker), queue, count, session, owner, lock_ttl, timeout, claim)
    q = broker.queue(queue)
    jobs, tokens = broker.pull(q, count, session, owner, lock_ttl, False, claim)
    if not jobs and timeout > 0:
        return _pullb_later(broker, q, count, session, owner, lock_ttl, timeout, claim)
    return _pullb_reply(jobs, tokens)


async def _pullb_later(
    broker: Engine, q: QueueState, count: int, session: Session, owner: str | None, lock_ttl: float,
    timeout: float, claim: GroupClaim | None,
) -> Reply:
    jobs, tokens = await broker.pull_later(q, count, session, owner, lock_ttl, False, timeout, claim)
    return _pullb_reply(jobs, tokens)


async def _pullb_awaited(
    jobs: AwaitedJobs, queue: str, count: int, session: Session, owner: str | None, lock_ttl: float, timeout: float,
    claim: GroupClaim | None,
) -> Reply:
    pulled, tokens = await jobs.pull_async(queue, count, session, owner, lock_ttl, timeout, claim)
    return _pullb_reply(pulled, tokens)


def _pullb_reply(jobs: list[Job], tokens: list[str] | None) -> Reply:
    reply: Reply = {"ok": True, "jobs": jobs}
    if tokens is not None:
        reply["tokens"] = tokens
    return reply


def handle_ack(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply | Awaitable[Reply]:
    job_id = cmd.get("id")
    token = cmd.get("token")
    remove = cmd.get("removeOnComplete") is True
    result = cmd.get("result")
    has_result = result is not None or "result" in cmd
    if has_result:
        check_nesting(result, "result")
    if broker.awaits_jobs:
        return cast(AwaitedJobs, broker).ack_async(job_id, token, result, has_result, remove)
    try:
        job = broker.active_job(job_id, token)
    except CommandError as refusal:
        # The attempt may have been finalized (timeout) or requeued (lost lease, stall) meanwhile.
        return broker.late_ack(job_id, token, result, has_result, remove, refusal)
    broker.ack(job, result, has_result, remove)
    return {"ok": True}


def handle_ackb(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply | Awaitable[Reply]:
    ids = options.string_list(cmd, "ids")
    tokens = cmd.get("tokens")
    results = cmd.get("results")
    if tokens is not None and (type(tokens) is not list or len(tokens) != len(ids)):
        raise CommandError(errors.ACKB_TOKENS_LENGTH)
    if results is not None and (type(results) is not list or len(results) != len(ids)):
        raise CommandError(errors.ACKB_RESULTS_LENGTH)
    for i, result in enumerate(results or ()):
        try:
            check_nesting(result, "result")
        except CommandError as exc:
            raise CommandError(errors.item_error("results", i, exc.message)) from None
    if broker.awaits_jobs:
        return cast(AwaitedJobs, broker).ack_batch_async(ids, tokens, results)
    return broker.ack_batch(ids, tokens, results)


def handle_fail(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply | Awaitable[Reply]:
    job_id = cmd.get("id")
    token = cmd.get("token")
    if broker.awaits_jobs:
        return cast(AwaitedJobs, broker).fail_async(
            job_id, token, cmd.get("error"), cmd.get("stack"),
            cmd.get("unrecoverable") is True, cmd.get("removeOnFail") is True,
        )
    try:
        job = broker.active_job(job_id, token)
    except CommandError as refusal:
        return broker.late_fail(job_id, token, refusal)
    broker.fail(
        job,
        cmd.get("error"),
        cmd.get("stack"),
        cmd.get("unrecoverable") is True,
        cmd.get("removeOnFail") is True,
    )
    return {"ok": True}

"""Flow commands: PUSHF, UpdateParent, GetChildrenValues, GetFailedChildrenValues,
GetIgnoredChildrenFailures, RemoveChildDependency, RemoveUnprocessedChildren and MoveToWaitingChildren."""
from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from bunqueue import options
from bunqueue._core.jobs import Job
from bunqueue.broker.engine import Engine, Session
from bunqueue.commands.jobs import SIZE_CHECK_FRAME_BYTES
from bunqueue.errors import CommandError

Reply = dict[str, Any]


def handle_pushf(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply | Awaitable[Reply]:
    jobs = broker.prepare_graph(cmd.get("jobs"), session.frame_size > SIZE_CHECK_FRAME_BYTES)
    commit = broker.commit_graph(jobs)
    if commit is None:
        broker.publish_graph(jobs)
        return _pushf_reply(jobs)
    return _publish_after(broker, jobs, commit)


async def _publish_after(broker: Engine, jobs: list[Job], commit: asyncio.Future[str | None]) -> Reply:
    try:
        failure = await asyncio.shield(commit)
    except BaseException:
        broker.abandon_graph(jobs)
        raise
    if failure is not None:
        broker.abandon_graph(jobs)
        raise CommandError(failure)
    broker.publish_graph(jobs)
    return _pushf_reply(jobs)


def _pushf_reply(jobs: list[Job]) -> Reply:
    return {"ok": True, "data": {"jobs": jobs}}


def handle_update_parent(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.update_parent(cmd.get("childId"), cmd.get("parentId"))
    return {"ok": True}


def handle_get_children_values(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "data": {"values": broker.children_values(cmd.get("id"))}}


def handle_get_failed_children_values(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "values": broker.failed_children_values(options.job_id_arg(cmd))}


def handle_get_ignored_children_failures(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "values": broker.ignored_children_failures(options.job_id_arg(cmd))}


def handle_remove_child_dependency(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "removed": broker.remove_child_dependency(options.job_id_arg(cmd))}


def handle_remove_unprocessed_children(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.remove_unprocessed_children(cmd.get("id"))
    return {"ok": True}


def handle_move_to_waiting_children(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.move_to_waiting_children(cmd.get("id"), cmd.get("token"))
    return {"ok": True, "data": {"moved": True}}

"""Cron, CronDelete, CronList, CronGet."""
from __future__ import annotations

from typing import Any

from bunqueue import errors
from bunqueue.broker.engine import Engine, Session
from bunqueue.errors import CommandError

Reply = dict[str, Any]


def handle_cron(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "cron": broker.upsert_cron(cmd)}


def handle_cron_delete(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    if not broker.remove_cron(cmd.get("name")):
        raise CommandError(errors.CRON_NOT_FOUND)
    return {"ok": True}


def handle_cron_list(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "crons": broker.list_crons()}


def handle_cron_get(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "cron": broker.cron_view(cmd.get("name"))}

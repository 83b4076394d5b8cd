"""Cron, CronDelete, CronList, CronGet."""
from __future__ import annotations

from typing import Any

from bunqueue import errors
from bunqueue.broker.engine import Session
from bunqueue.broker.facade import Broker
from bunqueue.errors import CommandError

Reply = dict[str, Any]


def handle_cron(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "cron": broker.crons.upsert(cmd).view()}


def handle_cron_delete(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    if not broker.crons.remove(cmd.get("name")):
        raise CommandError(errors.CRON_NOT_FOUND)
    return {"ok": True}


def handle_cron_list(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "crons": broker.crons.listing()}


def handle_cron_get(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "cron": broker.crons.get(cmd.get("name")).view()}

"""Crons: Cron, CronDelete, CronList, CronGet, over the registry that fires them
(``timers.cronregistry.CronRegistry``). A cron's job goes through PUSH's own path when it fires."""
from __future__ import annotations

from typing import Any

from bunqueue.broker.wiring import Wiring


def upsert_cron(broker: Wiring, definition: dict[str, Any]) -> dict[str, Any]:
    """Add or replace the cron the request defines (the registry checks its fields); its view."""
    return broker.crons.upsert(definition).view()


def remove_cron(broker: Wiring, name: Any) -> bool:
    return broker.crons.remove(name)


def list_crons(broker: Wiring) -> list[dict[str, Any]]:
    return broker.crons.listing()


def cron_view(broker: Wiring, name: Any) -> dict[str, Any]:
    """The named cron's view; ``CommandError`` when there is none."""
    return broker.crons.get(name).view()

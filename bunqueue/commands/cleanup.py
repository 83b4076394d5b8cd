"""Queue-wide commands: Drain, Obliterate, Clean."""
from __future__ import annotations

from typing import Any

from bunqueue import options
from bunqueue.broker.facade import Broker
from bunqueue.broker.ops import cleanup
from bunqueue.broker.session import Session

Reply = dict[str, Any]


def handle_drain(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "count": cleanup.drain(broker, options.queue_name(cmd))}


def handle_obliterate(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    cleanup.obliterate(broker, options.queue_name(cmd))
    return {"ok": True}


def handle_clean(broker: Broker, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    # Any finite age, as the reference computes now - grace (a numeric string counts as its number).
    grace = options.number_arg(cmd, "grace", required=True, coerce=True)
    state = options.optional_string(cmd, "state")
    limit = options.count_arg(cmd, "limit", cleanup.DEFAULT_CLEAN_LIMIT, finite=True)
    assert grace is not None
    ids = cleanup.clean(broker, queue, grace, state, int(limit), broker.clock())
    return {"ok": True, "count": len(ids), "ids": ids}

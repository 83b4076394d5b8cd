"""Queue-wide commands: Drain, Obliterate, Clean."""
from __future__ import annotations

from typing import Any

from bunqueue import options
from bunqueue.broker.engine import Engine, Session

Reply = dict[str, Any]

# Clean's limit when none is given.
DEFAULT_CLEAN_LIMIT = 1000


def handle_drain(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    return {"ok": True, "count": broker.drain(options.queue_name(cmd))}


def handle_obliterate(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    broker.obliterate(options.queue_name(cmd))
    return {"ok": True}


def handle_clean(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    queue = options.queue_name(cmd)
    # Any finite age, as the reference computes now - grace (a numeric string counts as its number).
    grace = options.number_arg(cmd, "grace", required=True, coerce=True)
    state = options.optional_string(cmd, "state")
    limit = options.count_arg(cmd, "limit", DEFAULT_CLEAN_LIMIT, finite=True)
    assert grace is not None
    ids = broker.clean(queue, grace, state, int(limit), broker.clock())
    return {"ok": True, "count": len(ids), "ids": ids}

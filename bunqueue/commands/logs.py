"""Job log commands: AddLog, GetLogs, ClearLogs."""
from __future__ import annotations

import math
from typing import Any

from bunqueue import errors, options
from bunqueue.broker.engine import Engine, Session
from bunqueue.errors import CommandError

Reply = dict[str, Any]


def handle_add_log(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    message = options.required_string(cmd, "message")
    # Levels are info, warn and error by convention; any text is stored as given, as in the reference.
    level = options.optional_string(cmd, "level") or "info"
    if not broker.add_log(options.job_id_arg(cmd), message, level, broker.clock()):
        raise CommandError(errors.JOB_NOT_FOUND)
    return {"ok": True, "data": {"added": True}}


def handle_get_logs(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    start = options.number_arg(cmd, "start")
    end = options.number_arg(cmd, "end")
    entries, count = broker.get_logs_page(options.job_id_arg(cmd), start, end)
    return {"ok": True, "data": {"logs": entries, "count": count}}


def handle_clear_logs(broker: Engine, cmd: dict[str, Any], session: Session) -> Reply:
    # Omitted, 0 or negative clears every entry; a fraction keeps its whole part; a numeric string is
    # its number; Infinity keeps them all. NaN and text are refused before anything changes.
    keep = options.coerce_numeric(cmd.get("keepLogs", 0))
    if keep is None:
        keep = 0
    if type(keep) is bool or not isinstance(keep, (int, float)) or math.isnan(keep):
        raise CommandError(errors.must_be_number("keepLogs"))
    if keep == math.inf:
        return {"ok": True}
    broker.clear_logs(options.job_id_arg(cmd), math.floor(keep) if keep > 0 else 0)
    return {"ok": True}

"""The one table from command names to handlers.

A handler takes (broker, request, session) and returns a reply dict, or an awaitable of one when the
command has to wait (long-poll pulls). Handlers raise ``CommandError`` for ``{ok: false, error}``.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bunqueue.broker.broker import Broker
from bunqueue.broker.handlers import control, jobs, queries, system
from bunqueue.broker.session import Session

Handler = Callable[[Broker, dict[str, Any], Session], "dict[str, Any] | Awaitable[dict[str, Any]]"]

HANDLERS: dict[str, Handler] = {
    "Hello": system.handle_hello,
    "Ping": system.handle_ping,
    "PUSH": jobs.handle_push,
    "PUSHB": jobs.handle_pushb,
    "PULL": jobs.handle_pull,
    "PULLB": jobs.handle_pullb,
    "ACK": jobs.handle_ack,
    "ACKB": jobs.handle_ackb,
    "FAIL": jobs.handle_fail,
    "GetJob": queries.handle_get_job,
    "GetJobByCustomId": queries.handle_get_job_by_custom_id,
    "GetState": queries.handle_get_state,
    "GetResult": queries.handle_get_result,
    "GetJobCounts": queries.handle_get_job_counts,
    "Count": queries.handle_count,
    "Dlq": queries.handle_dlq,
    "Pause": control.handle_pause,
    "Resume": control.handle_resume,
    "IsPaused": control.handle_is_paused,
}

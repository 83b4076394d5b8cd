"""The synchronous Job: the asyncio Job's fields, and its operations as blocking calls."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bunqueue.asyncio import job as aio
from bunqueue.client.transport import Transport
from bunqueue.sdk.blocking import blocking


class Job(aio.JobView):
    """A job from a query, or one a Worker holds (then ``token`` is its lock token)."""

    def __init__(
        self,
        raw: dict[str, Any],
        connection: Transport | None = None,
        token: str | None = None,
        on_progress: Callable[[Job, Any], object] | None = None,
    ) -> None:
        super().__init__(raw)
        self.token = token
        progress = (lambda _, value: on_progress(self, value)) if on_progress is not None else None
        self._aio = aio.Job(raw, connection, token, progress)

    @property
    def name(self) -> str | None:
        """The name inside ``data`` (the published SDK's envelope); the record's own name is
        ``raw["name"]``."""
        data = self.raw.get("data")
        if isinstance(data, dict) and data.get("name") is not None:
            return str(data["name"])
        return None

    update_progress = blocking(aio.Job.update_progress)
    log = blocking(aio.Job.log)
    heartbeat = blocking(aio.Job.heartbeat)
    extend_lock = blocking(aio.Job.extend_lock)
    get_state = blocking(aio.Job.get_state)
    get_children_values = blocking(aio.Job.get_children_values)
    remove = blocking(aio.Job.remove)
    discard = blocking(aio.Job.discard)
    promote = blocking(aio.Job.promote)
    retry = blocking(aio.Job.retry)
    update_data = blocking(aio.Job.update_data)
    change_priority = blocking(aio.Job.change_priority)
    change_delay = blocking(aio.Job.change_delay)
    move_to_delayed = blocking(aio.Job.move_to_delayed)

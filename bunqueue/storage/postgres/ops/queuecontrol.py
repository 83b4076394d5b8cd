"""Queue controls in PostgreSQL: Pause, Resume, IsPaused over ``bunqueue_queues.paused``.

The claim statement reads the flag itself (``statements.CLAIM``), so a pause on one broker stops claims on
every broker from its commit on. A Resume notifies the queue, waking long-polling pulls on every broker.
The pause events are the memory engine's (``EventHub.queue_paused``): the system event to this broker's
streams, the queue-level job event (jobId "") to every broker's listeners.
"""
from __future__ import annotations

from collections.abc import Callable

from bunqueue.broker.components import eventhub
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.postgres.statements import CHANNEL


def waking(write: str) -> str:
    """``write`` (a change of queue $2's row), then a notification of the queue if a row changed: a control
    that may free work makes every broker's waiting pulls of the queue claim again."""
    return (
        f"WITH changed AS ({write} RETURNING 1)"
        f" SELECT pg_notify('{CHANNEL}', json_build_array($1::text, $2::text)::text) FROM changed"
    )


# The queue's row is made by its first control, as the memory engine makes the queue's state.
_SET_PAUSED = """
INSERT INTO bunqueue_queues (namespace, queue, paused) VALUES ($1, $2, {paused})
ON CONFLICT (namespace, queue) DO UPDATE SET paused = excluded.paused
"""
PAUSE = _SET_PAUSED.format(paused="true")
RESUME = waking(_SET_PAUSED.format(paused="false"))

IS_PAUSED = "SELECT paused FROM bunqueue_queues WHERE namespace = $1 AND queue = $2"


class QueueControlFamily(Family):
    events: EventHub
    # ``EventsFamily.publish``: publish(queue, event type, job id, **fields).
    publish: Callable[..., None]

    async def pause(self, queue: str) -> None:
        await self.pool.execute(PAUSE, self.namespace, queue)
        self._paused(queue, True)

    async def resume(self, queue: str) -> None:
        await self.pool.execute(RESUME, self.namespace, queue)
        self._paused(queue, False)

    def _paused(self, queue: str, paused: bool) -> None:
        if self.events.notices:
            self.events.notify(eventhub.QUEUE_PAUSED if paused else eventhub.QUEUE_RESUMED, {"queue": queue})
        self.publish(queue, eventhub.PAUSED if paused else eventhub.RESUMED, "")

    async def is_paused(self, queue: str) -> bool:
        return bool(await self.pool.fetchval(IS_PAUSED, self.namespace, queue))

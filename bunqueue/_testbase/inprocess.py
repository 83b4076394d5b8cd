"""In-process broker tests: commands go through the one handler table to a broker on a fake clock, with a
store that records what it was told and a session that collects the events."""
from __future__ import annotations

from typing import Any

from bunqueue._core.jobs import Job
from bunqueue._testbase.clock import T0, FakeClock
from bunqueue.broker.facade import Broker
from bunqueue.broker.session import Session
from bunqueue.commands import HANDLERS
from bunqueue.storage import MemoryStore

QUEUE = "q"


class RecordingStore(MemoryStore):
    """A memory store that lists every change it is told of, as (method, job id or queue)."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, str]] = []

    def job_added(self, job: Job) -> None:
        self.calls.append(("job_added", job.id))

    def job_changed(self, job: Job, sync: bool = True) -> None:
        self.calls.append(("job_changed", job.id))

    def job_activated(self, job: Job) -> None:
        self.calls.append(("job_activated", job.id))

    def job_removed(self, job_id: str) -> None:
        self.calls.append(("job_removed", job_id))

    def result_stored(self, job_id: str, result: Any) -> None:
        self.calls.append(("result_stored", job_id))

    def dlq_changed(self, queue: str, entry: dict[str, Any]) -> None:
        self.calls.append(("dlq_changed", entry["job"].id))

    def dlq_removed(self, queue: str, job_id: str) -> None:
        self.calls.append(("dlq_removed", job_id))

    def take(self) -> list[tuple[str, str]]:
        calls, self.calls = self.calls, []
        return calls


class World:
    """A broker, its recording store, its fake clock and one client session subscribed to ``QUEUE``."""

    def __init__(self) -> None:
        self.clock = FakeClock(T0)
        self.store = RecordingStore()
        self.broker = Broker(store=self.store, clock=self.clock)
        self.armed: list[tuple[str, float]] = []
        self.broker.wake_at = lambda kind, when: self.armed.append((kind, when))
        self.session = Session()
        self.events: list[dict[str, Any]] = []
        self.session.deliver = lambda frame: self.events.append(frame["event"])
        self.send({"cmd": "SubscribeEvents", "queue": QUEUE})

    def send(self, cmd: dict[str, Any]) -> dict[str, Any]:
        reply = HANDLERS[cmd["cmd"]](self.broker, cmd, self.session)
        assert isinstance(reply, dict), reply
        return reply

    def push(self, **opts: Any) -> str:
        reply = self.send({"cmd": "PUSH", "queue": QUEUE, "name": "n", "data": {"x": 1}, **opts})
        assert reply["ok"], reply
        return reply["id"]

    def pull(self, **opts: Any) -> tuple[Job, str | None]:
        reply = self.send({"cmd": "PULL", "queue": QUEUE, **opts})
        assert reply["ok"] and reply["job"] is not None, reply
        return reply["job"], reply.get("token")

    def job(self, job_id: str) -> Job:
        return self.broker.jobs[job_id]

    def settle(self, kind: str, at: float) -> float | None:
        """Move the clock to ``at`` and run that kind of deadline, as the server's timer would."""
        self.clock.set(at)
        return self.broker.deadline_handlers()[kind](at)

    def take_events(self) -> list[tuple[str, Any]]:
        """(eventType, the field that says what happened) of every event since the last call."""
        out = []
        for event in self.events:
            kind = event["eventType"]
            detail = event.get("data") if kind == "stalled" else event.get("terminal", event.get("prev"))
            out.append((kind, detail))
        self.events.clear()
        return out

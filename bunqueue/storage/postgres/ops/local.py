"""What a PostgreSQL broker answers from its own process: its connections, listeners and latency samples.

The event hub and the counters are the memory engine's components: subscribers, stream taps and webhooks
are this broker's own (events reach them from any broker through NOTIFY), and the counters count what this
broker served.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.session import Session
from bunqueue.monitoring.counters import Counters, Histogram
from bunqueue.monitoring.snapshot import Totals
from bunqueue.storage.postgres.figures import FigureReader
from bunqueue.storage.postgres.ops.family import Family

JobListener = Callable[[dict[str, Any]], None]
SystemListener = Callable[[str, dict[str, Any]], None]


class LocalFamily(Family):
    events: EventHub
    counters: Counters
    figure_reader: FigureReader

    def totals(self) -> Totals:
        """The last figures read: the probes call it right after StorageStatus or DashboardOverview, which
        read them again, so it answers without a round trip of its own."""
        return self.figure_reader.totals

    def latency_histograms(self) -> dict[str, Histogram]:
        return self.counters.latency

    def connection_opened(self) -> None:
        self.counters.connections += 1

    def connection_closed(self) -> None:
        self.counters.connections -= 1

    def release_session(self, session: Session) -> int:
        """A connection closed: its subscription goes. The jobs it pulled keep their leases, so that a worker
        that reconnects (to this broker or another) can still renew, ack or fail them with its token; a
        worker that never comes back loses them when their lockTtl passes."""
        self.events.unsubscribe(session)
        return 0

    def hears_system_events(self) -> bool:
        return bool(self.events.notices)

    def system_event(self, name: str, data: dict[str, Any]) -> None:
        self.events.notify(name, data)

    def listen_all(self, on_job: JobListener, on_system: SystemListener) -> bool:
        return self.events.listen_all(on_job, on_system)

    def unlisten_all(self, on_job: JobListener, on_system: SystemListener) -> None:
        self.events.unlisten_all(on_job, on_system)

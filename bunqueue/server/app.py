"""The running server: listeners, the broker's timers, graceful shutdown."""
from __future__ import annotations

import asyncio
import gc
import logging
import signal
from typing import Any

from bunqueue import errors
from bunqueue._core.packer import ReplyPacker
from bunqueue.broker import Broker, Session
from bunqueue.broker.broker import now_ms
from bunqueue.config import Settings
from bunqueue.server.tcp import BrokerProtocol, check_token

log = logging.getLogger("bunqueue")


def tune_collector() -> None:
    """Collect young objects every 50,000 allocations instead of every 700.

    A busy broker allocates a few containers per job and keeps hundreds of thousands of them alive, but
    makes no reference cycles of its own: at the default rate the cyclic collector spends much of the
    push path re-scanning queued jobs. Objects alive at start-up are frozen out of collection entirely.
    """
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)


class LeaseTimer:
    """One loop timer armed for the broker's earliest lease deadline: no periodic scan of active jobs."""

    def __init__(self, broker: Broker, loop: asyncio.AbstractEventLoop) -> None:
        self.broker = broker
        self.loop = loop
        self.when: float | None = None
        self.handle: asyncio.TimerHandle | None = None

    def arm(self, when: float) -> None:
        if self.when is not None and self.when <= when:
            return
        if self.handle is not None:
            self.handle.cancel()
        self.when = when
        self.handle = self.loop.call_later(max(0.0, when - now_ms()) / 1000.0, self.fire)

    def fire(self) -> None:
        self.handle = None
        self.when = None
        self.broker.expire_leases(now_ms())
        deadline = self.broker.next_lease_deadline()
        if deadline is not None:
            self.arm(deadline)

    def cancel(self) -> None:
        if self.handle is not None:
            self.handle.cancel()
            self.handle = None


class BrokerServer:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.tokens = settings.tokens
        self.broker = Broker(max_completed_jobs=settings.max_completed_jobs)
        self.connections: set[BrokerProtocol] = set()
        # One packer for every connection: packing is synchronous, so they never interleave.
        self.packer = ReplyPacker()
        self.tcp_server: asyncio.base_events.Server | None = None
        self.lease_timer: LeaseTimer | None = None
        self.stopping: asyncio.Event | None = None

    def authenticate(self, token: Any, session: Session) -> dict[str, Any]:
        if self.tokens and check_token(token, self.tokens):
            session.authenticated = True
            return {"ok": True}
        return {"ok": False, "error": errors.INVALID_TOKEN}

    async def start(self) -> None:
        loop = asyncio.get_running_loop()
        tune_collector()
        self.stopping = asyncio.Event()
        # Signals are handled before the port opens: whoever sees the port may stop the server at once.
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self.request_stop)
        self.lease_timer = LeaseTimer(self.broker, loop)
        self.broker.wake_at = self.lease_timer.arm
        self.tcp_server = await loop.create_server(
            lambda: BrokerProtocol(self),
            self.settings.host,
            self.settings.tcp_port,
            reuse_address=True,
            backlog=1024,
        )

    @property
    def tcp_address(self) -> tuple[str, int]:
        assert self.tcp_server is not None
        host, port = self.tcp_server.sockets[0].getsockname()[:2]
        return host, port

    def request_stop(self) -> None:
        if self.stopping is not None:
            self.stopping.set()

    async def serve_until_stopped(self) -> None:
        assert self.stopping is not None
        await self.stopping.wait()
        log.info("shutting down")
        await self.shutdown()

    async def shutdown(self) -> None:
        """Stop accepting, let workers finish their active jobs (bounded), then close every connection."""
        if self.tcp_server is not None:
            self.tcp_server.close()
        deadline = now_ms() + self.settings.shutdown_timeout_ms
        while self.broker.active_count and self.connections and now_ms() < deadline:
            await asyncio.sleep(0.1)
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        if self.tcp_server is not None:
            await self.tcp_server.wait_closed()
        if self.lease_timer is not None:
            self.lease_timer.cancel()

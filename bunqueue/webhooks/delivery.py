"""Webhook delivery on a thread of its own, so that it never competes with commands on the broker's loop.

The broker only appends queue events to each webhook's bounded outbox (see ``webhooks.registry``) and,
when the delivery side is idle, wakes it. The delivery thread runs its own event loop with one aiohttp
session: it builds each body, signs it and POSTs it, one request per event as the receiver expects, with
at most ``concurrency`` requests in flight per webhook. An attempt has a timeout; an event is attempted up
to ``max_attempts`` times, waiting ``retry_delay * attempt`` between attempts; redirects are not followed
(a receiver must not steer the broker to another address).

Python threads share one interpreter lock, and every hand-over of it costs the broker's loop a wait: a
delivery thread working beside a burst of commands halves the broker's rate. So while the broker offers
events faster than ``BUSY_RATE`` a second, the thread starts no new delivery; it catches up once the
burst is over. A burst that does not end gets ``SLICE_S`` of delivery after each ``MAX_DEFER_S`` of
waiting; what does not fit an outbox meanwhile is dropped and counted.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from bunqueue.broker.clock import now_ms
from bunqueue.broker.components import eventnames
from bunqueue.webhooks.registry import EventRecord, Webhook, WebhookRegistry, payload_of

if TYPE_CHECKING:
    import aiohttp

log = logging.getLogger("bunqueue.webhooks")

# Work and pause lengths of the delivery thread while the broker is busy: at most a fifth of the time.
BUSY_RATE = 1000
MAX_DEFER_S = 1.0
SLICE_S = 0.1
# How often, while deliveries run or wait, the thread measures the broker's event rate and looks for
# webhooks that got events...
POLL_S = 0.01
# ...and how often while it waits out a burst: each look takes the interpreter lock from the broker, and
# on a busy machine the broker may then wait a scheduler time slice to get it back.
BURST_POLL_S = 0.1
# Longest wait at shutdown for the outboxes to empty.
DRAIN_LIMIT_MS = 5000


def signature(body: bytes, secret: str) -> str:
    """X-Webhook-Signature: hex HMAC-SHA256 of the exact body bytes."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def encode_payload(payload: dict[str, Any]) -> bytes:
    # Job data may hold what JSON has no word for (bytes, msgpack extension values): written as text.
    return json.dumps(payload, separators=(",", ":"), default=_json_fallback).encode()


def _json_fallback(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return None


def new_loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every supported platform
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


class WebhookDelivery:
    """Owns the delivery thread. ``wake`` and ``close`` are called on the broker's loop; everything else
    runs on the thread's loop."""

    def __init__(
        self,
        registry: WebhookRegistry,
        *,
        timeout_ms: float = 10_000,
        max_attempts: int = 3,
        retry_delay_ms: float = 1000,
        concurrency: int = 4,
    ) -> None:
        self.registry = registry
        self.timeout_s = timeout_ms / 1000
        self.max_attempts = max(1, max_attempts)
        self.retry_delay = retry_delay_ms / 1000
        self.concurrency = max(1, concurrency)
        self.closed = False
        # What a failed POST may raise (set with the HTTP client, see ``_main``).
        self.send_errors: tuple[type[BaseException], ...] = ()
        # Started with the first webhook, so a server without webhooks runs no thread.
        self.thread: threading.Thread | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.work = asyncio.Event()
        # Thread side: sender tasks, how many run, the shutdown deadline, and the slicing state.
        self.tasks: set[asyncio.Task[None]] = set()
        self.active = 0
        # Events taken from an outbox and not yet delivered or given up on.
        self.in_flight = 0
        self.stop_at: float | None = None
        # Pacing: set while deliveries may start; the event count and time of the last look; when the
        # current deferral began and when the slice granted after a long one ends.
        self.go = asyncio.Event()
        self.go.set()
        self.offered_seen = 0
        self.looked_at = 0.0
        self.deferred_at = 0.0
        self.slice_end = 0.0
        # The broker's loop, to which the thread hands webhook:fired and webhook:failed (see ``_tell``).
        self.broker_loop: asyncio.AbstractEventLoop | None = None
        registry.wake = self.wake
        registry.prepare = self.prepare

    # -- broker side ---------------------------------------------------------------------------------

    def prepare(self) -> None:
        """Start the delivery thread (it loads its HTTP client and waits for events)."""
        if self.closed or self.loop is not None:
            return
        try:
            self.broker_loop = asyncio.get_running_loop()
        except RuntimeError:
            # Started outside a loop (a broker driven without a server): outcomes are not told.
            self.broker_loop = None
        self.loop = new_loop()
        self.thread = threading.Thread(target=self._run, name="bunqueue-webhooks", daemon=True)
        self.thread.start()

    def wake(self) -> None:
        if self.closed:
            return
        if self.loop is None:
            self.prepare()
        else:
            self.loop.call_soon_threadsafe(self.work.set)

    async def close(self, drain_ms: float = DRAIN_LIMIT_MS) -> None:
        """Deliver what is waiting for up to ``drain_ms``, then stop; what is left unsent is logged."""
        self.closed = True
        if self.loop is None or self.thread is None:
            return
        self.loop.call_soon_threadsafe(self._stop, drain_ms / 1000)
        await asyncio.get_running_loop().run_in_executor(None, self.thread.join)
        unsent = self.in_flight + sum(len(hook.outbox) for hook in self.registry.snapshot)
        if unsent:
            log.warning("%d webhook deliveries were not made before shutdown", unsent)

    # -- delivery thread -----------------------------------------------------------------------------

    def _run(self) -> None:
        assert self.loop is not None
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._main())
        finally:
            self.loop.close()

    def _stop(self, drain_s: float) -> None:
        self.stop_at = time.monotonic() + drain_s
        self.go.set()
        self.work.set()

    async def _main(self) -> None:
        # The HTTP client is loaded with the thread, by the first event: a broker without webhooks does
        # not carry it.
        from bunqueue.webhooks import client

        self.send_errors = client.SEND_ERRORS
        session = client.new_session(self.timeout_s, self.registry.allow_private)
        try:
            while True:
                if not self.active:
                    # Said before looking, so an event appended after the look wakes the thread.
                    self.registry.idle = True
                self._pace()
                self._dispatch(session)
                if self.stop_at is not None and (not self.active or time.monotonic() >= self.stop_at):
                    break
                if self.active:
                    await asyncio.sleep(POLL_S if self.go.is_set() else BURST_POLL_S)
                else:
                    await self.work.wait()
                    # Measure the event rate before the first delivery: a burst is waited out from its start.
                    self.offered_seen = self.registry.offered
                    self.looked_at = time.monotonic()
                    await asyncio.sleep(POLL_S)
                self.work.clear()
            for task in list(self.tasks):
                task.cancel()
            await asyncio.gather(*self.tasks, return_exceptions=True)
        finally:
            await session.close()

    def _dispatch(self, session: aiohttp.ClientSession) -> None:
        """Start senders for webhooks whose outbox holds more events than senders work on."""
        loop = asyncio.get_running_loop()
        for hook in self.registry.snapshot:
            for _ in range(min(self.concurrency, len(hook.outbox)) - hook.senders):
                hook.senders += 1
                self.active += 1
                task = loop.create_task(self._send(hook, session))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

    async def _send(self, hook: Webhook, session: aiohttp.ClientSession) -> None:
        outbox = hook.outbox
        try:
            while not hook.removed:
                if not self.go.is_set():
                    await self.go.wait()
                event = outbox.take()
                if event is None:
                    return
                self.in_flight += 1
                await self._deliver(hook, event, session)
                self.in_flight -= 1
        finally:
            hook.senders -= 1
            self.active -= 1
            if not self.active:
                self.work.set()

    def _pace(self) -> None:
        """Let deliveries start unless the broker is in a burst of events (see the module's notes)."""
        now = time.monotonic()
        offered = self.registry.offered
        rate = (offered - self.offered_seen) / max(now - self.looked_at, POLL_S)
        self.offered_seen = offered
        self.looked_at = now
        go = self.go
        if rate < BUSY_RATE or self.stop_at is not None:
            go.set()
        elif go.is_set():
            if now >= self.slice_end:
                go.clear()
                self.deferred_at = now
        elif now - self.deferred_at >= MAX_DEFER_S:
            go.set()
            self.slice_end = now + SLICE_S

    async def _deliver(self, hook: Webhook, event: EventRecord, session: aiohttp.ClientSession) -> None:
        payload = payload_of(event)
        body = encode_payload(payload)
        headers = {
            "Content-Type": "application/json",
            "X-Webhook-Event": payload["event"],
            "X-Webhook-Timestamp": str(payload["timestamp"]),
        }
        if hook.secret:
            headers["X-Webhook-Signature"] = signature(body, hook.secret)
        last_error = ""
        for attempt in range(self.max_attempts):
            if attempt:
                await asyncio.sleep(self.retry_delay * attempt)
                if hook.removed:
                    return
            try:
                async with session.post(hook.url, data=body, headers=headers, allow_redirects=False) as resp:
                    await resp.read()
                    if 200 <= resp.status < 300:
                        hook.success_count += 1
                        hook.last_triggered = now_ms()
                        if self.registry.notices:
                            self._tell(eventnames.WEBHOOK_FIRED, {
                                "webhookId": hook.id, "url": hook.url, "event": payload["event"]})
                        return
                    last_error = f"HTTP {resp.status}"
            except self.send_errors as exc:
                last_error = str(exc) or type(exc).__name__
        hook.failure_count += 1
        log.debug("webhook %s: delivery failed after %d attempts: %s", hook.id, self.max_attempts, last_error)
        if self.registry.notices:
            self._tell(eventnames.WEBHOOK_FAILED, {
                "webhookId": hook.id, "url": hook.url, "event": payload["event"], "error": last_error})

    def _tell(self, name: str, data: dict[str, Any]) -> None:
        """A delivery's outcome, told on the broker's loop: its listeners are not for this thread to call.
        Built only while a stream listens (the caller looks at ``notices`` first)."""
        if self.broker_loop is not None and not self.broker_loop.is_closed():
            self.broker_loop.call_soon_threadsafe(self.registry.notify, name, data)

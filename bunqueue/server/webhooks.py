"""Webhook delivery: POSTs the payloads waiting in each webhook's outbox, off the command path.

Each webhook with work gets at most ``concurrency`` sender tasks, started when its outbox fills and ending
when it is empty, so an idle server runs none. A payload is attempted up to ``max_attempts`` times with a
timeout each, waiting ``retry_delay * attempt`` between attempts; redirects are not followed (a receiver
must not steer the broker to another address).
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import logging
import socket
from typing import Any

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from bunqueue.broker.clock import now_ms
from bunqueue.monitoring.webhook_urls import address_error
from bunqueue.monitoring.webhooks import Webhook, WebhookRegistry

log = logging.getLogger("bunqueue.webhooks")


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


class PublicResolver(AbstractResolver):
    """Resolves names as usual but refuses addresses the URL rules refuse, so a name that resolves to a
    private or loopback address (DNS rebinding) cannot reach one. Used unless private addresses are
    allowed."""

    def __init__(self) -> None:
        self.inner = DefaultResolver()

    async def resolve(self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
                      ) -> list[ResolveResult]:
        results = await self.inner.resolve(host, port, family)
        allowed = [r for r in results if address_error(r["host"]) is None]
        if not allowed:
            raise OSError(f"{host} resolves only to addresses webhooks may not reach")
        return allowed

    async def close(self) -> None:
        await self.inner.close()


class WebhookDelivery:
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
        self.timeout = aiohttp.ClientTimeout(total=timeout_ms / 1000)
        self.max_attempts = max(1, max_attempts)
        self.retry_delay = retry_delay_ms / 1000
        self.concurrency = max(1, concurrency)
        self.session: aiohttp.ClientSession | None = None
        self.tasks: set[asyncio.Task[None]] = set()
        self.closing = False
        registry.wake = self.wake

    def wake(self, hook: Webhook) -> None:
        """A payload joined ``hook``'s outbox: start a sender unless enough are running."""
        if hook.in_flight >= self.concurrency or self.closing:
            return
        hook.in_flight += 1
        task = asyncio.get_running_loop().create_task(self._drain(hook))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _drain(self, hook: Webhook) -> None:
        try:
            outbox = hook.outbox
            while outbox and not hook.removed and not self.closing:
                await self._deliver(hook, outbox.popleft())
        finally:
            hook.in_flight -= 1

    async def _deliver(self, hook: Webhook, payload: dict[str, Any]) -> None:
        body = encode_payload(payload)
        headers = {
            "Content-Type": "application/json",
            "X-Webhook-Event": payload["event"],
            "X-Webhook-Timestamp": str(int(payload["timestamp"])),
        }
        if hook.secret:
            headers["X-Webhook-Signature"] = signature(body, hook.secret)
        session = self._session()
        last_error = ""
        for attempt in range(self.max_attempts):
            if attempt:
                await asyncio.sleep(self.retry_delay * attempt)
                if hook.removed or self.closing:
                    return
            try:
                async with session.post(hook.url, data=body, headers=headers, allow_redirects=False) as resp:
                    await resp.read()
                    if 200 <= resp.status < 300:
                        hook.success_count += 1
                        hook.last_triggered = now_ms()
                        return
                    last_error = f"HTTP {resp.status}"
            except (TimeoutError, aiohttp.ClientError, OSError, ValueError) as exc:
                last_error = str(exc) or type(exc).__name__
        hook.failure_count += 1
        log.debug("webhook %s: delivery failed after %d attempts: %s", hook.id, self.max_attempts, last_error)

    def _session(self) -> aiohttp.ClientSession:
        if self.session is None:
            resolver = None if self.registry.allow_private else PublicResolver()
            self.session = aiohttp.ClientSession(
                timeout=self.timeout,
                connector=aiohttp.TCPConnector(limit=256, ttl_dns_cache=60, resolver=resolver),
                skip_auto_headers=("User-Agent",),
                headers={"User-Agent": "bunqueue-webhook"},
            )
        return self.session

    async def close(self) -> None:
        """Stop sending (what is still queued is dropped with the process) and close the connections."""
        self.closing = True
        for task in list(self.tasks):
            task.cancel()
        if self.tasks:
            await asyncio.gather(*self.tasks, return_exceptions=True)
        if self.session is not None:
            await self.session.close()
            self.session = None

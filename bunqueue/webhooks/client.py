"""The webhook delivery thread's HTTP client (aiohttp), loaded only once a webhook has an event to send."""
from __future__ import annotations

import socket

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from bunqueue.webhooks.urls import address_error

# What a POST to a receiver may raise: each is a failed attempt, never a crash of the delivery thread.
SEND_ERRORS: tuple[type[BaseException], ...] = (TimeoutError, aiohttp.ClientError, OSError, ValueError)


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


def new_session(timeout_s: float, allow_private: bool) -> aiohttp.ClientSession:
    """One session for every delivery: no cookies, our User-Agent (redirects are refused per request)."""
    resolver = None if allow_private else PublicResolver()
    return aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=timeout_s),
        connector=aiohttp.TCPConnector(limit=256, ttl_dns_cache=60, resolver=resolver),
        cookie_jar=aiohttp.DummyCookieJar(),
        skip_auto_headers=("User-Agent",),
        headers={"User-Agent": "bunqueue-webhook"},
    )

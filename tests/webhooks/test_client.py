"""At delivery time a name that resolves to a refused address (DNS rebinding) is not connected to."""
from __future__ import annotations

import socket
from typing import Any

import pytest

from bunqueue.webhooks.client import PublicResolver
from bunqueue.webhooks.delivery import encode_payload, signature


class StubResolver:
    def __init__(self, hosts: list[str]) -> None:
        self.hosts = hosts

    async def resolve(self, host: str, port: int = 0, family: Any = socket.AF_INET) -> list[dict[str, Any]]:
        return [{"hostname": host, "host": h, "port": port, "family": family, "proto": 0, "flags": 0}
                for h in self.hosts]

    async def close(self) -> None:
        pass


async def test_private_answers_are_filtered_out() -> None:
    resolver = PublicResolver()
    resolver.inner = StubResolver(["10.0.0.5", "93.184.216.34", "::1"])  # type: ignore[assignment]
    assert [r["host"] for r in await resolver.resolve("example.com", 443)] == ["93.184.216.34"]


async def test_only_private_answers_refuse_the_connection() -> None:
    resolver = PublicResolver()
    resolver.inner = StubResolver(["127.0.0.1", "169.254.169.254", "fd00::1"])  # type: ignore[assignment]
    with pytest.raises(OSError, match="rebind.example resolves only to addresses webhooks may not reach"):
        await resolver.resolve("rebind.example", 80)


def test_payload_and_signature() -> None:
    body = encode_payload({"event": "job.pushed", "data": {"b": b"\x01\x02"}, "n": 1})
    assert body == b'{"event":"job.pushed","data":{"b":"0102"},"n":1}'
    # RFC 4231, test case 2.
    expected = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
    assert signature(b"what do ya want for nothing?", "Jefe") == expected

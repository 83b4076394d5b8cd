"""asyncio client for the bunqueue TCP protocol, used by tests, benchmarks and the CLI."""
from __future__ import annotations

from .connection import (
    AuthenticationError,
    BunqueueError,
    Connection,
    PreparedCommand,
    ProtocolError,
    connect,
    decode_payload,
    encode_frame,
    prepare,
)

__all__ = (
    "AuthenticationError",
    "BunqueueError",
    "Connection",
    "PreparedCommand",
    "ProtocolError",
    "connect",
    "decode_payload",
    "encode_frame",
    "prepare",
)

"""bunqueue: a job-queue broker that speaks the bunqueue wire protocol, and its Python client.

``from bunqueue import Queue, Worker, Job, FlowProducer, QueueEvents`` is the synchronous client (the
published SDK's API, with its simple mode ``Bunqueue``); ``bunqueue.asyncio`` is the asyncio one. Both
load on first use only, so starting the server never imports them.
"""
from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

# Name -> the module that defines it.
_CLIENT = {
    "Connection": "bunqueue.sdk",
    "EventEmitter": "bunqueue.sdk",
    "FlowNode": "bunqueue.sdk",
    "FlowProducer": "bunqueue.sdk",
    "Job": "bunqueue.sdk",
    "Queue": "bunqueue.sdk",
    "QueueEvents": "bunqueue.sdk",
    "TelemetryEvent": "bunqueue.sdk",
    "TelemetryHandler": "bunqueue.sdk",
    "Worker": "bunqueue.sdk",
    "AuthError": "bunqueue.errors",
    "BunqueueError": "bunqueue.errors",
    "CommandError": "bunqueue.errors",
    "CommandTimeoutError": "bunqueue.errors",
    "ConnectionClosedError": "bunqueue.errors",
    "SerializationError": "bunqueue.errors",
    "UnrecoverableError": "bunqueue.errors",
    "Bunqueue": "bunqueue.simple",
    "CancelSignal": "bunqueue.simple",
    "CancellationManager": "bunqueue.simple",
}
__all__ = sorted(_CLIENT)


def __getattr__(name: str) -> Any:
    home = _CLIENT.get(name)
    if home is None:
        raise AttributeError(f"module 'bunqueue' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(home), name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_CLIENT])

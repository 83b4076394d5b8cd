"""The published SDK's simple mode (``bunqueue.simple`` there too): ``Bunqueue``, a Queue and a Worker in
one object, and its parts that programs use on their own."""
from __future__ import annotations

from bunqueue.simple.app import Bunqueue
from bunqueue.simple.cancellation import CancellationManager, CancelSignal
from bunqueue.simple.circuit_breaker import WorkerCircuitBreaker
from bunqueue.simple.retry import calculate_backoff, execute_with_retry

__all__ = (
    "Bunqueue", "CancelSignal", "CancellationManager", "WorkerCircuitBreaker", "calculate_backoff",
    "execute_with_retry",
)

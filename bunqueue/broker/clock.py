"""The broker's clock: epoch milliseconds, as every timestamp and deadline on the wire is (compiled:
``bunqueue._core.clock``)."""
from __future__ import annotations

from bunqueue._core.clock import now_ms

__all__ = ["now_ms"]

"""The published SDK's telemetry types, for programs that annotate with them."""
from __future__ import annotations

from bunqueue.client.telemetry import TelemetryEvent, TelemetryHandler

__all__ = ("TelemetryEvent", "TelemetryHandler")

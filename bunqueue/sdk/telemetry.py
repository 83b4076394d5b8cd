"""The published SDK's telemetry types, for programs that annotate with them."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

TelemetryEvent = dict[str, Any]
TelemetryHandler = Callable[[TelemetryEvent], None]

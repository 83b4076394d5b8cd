"""A queue's stall settings (SetStallConfig, GetStallConfig): the defaults and how an update merges in.
``QueueState.stall_config`` holds a queue's settings, None while they are the defaults; what they mean to
a running job is ``timers.stalls``."""
from __future__ import annotations

from typing import Any

from bunqueue._core.jobs import wire_number
from bunqueue.options import js_finite

DEFAULT_STALL_CONFIG: dict[str, Any] = {
    "enabled": True, "stallInterval": 30000, "maxStalls": 3, "gracePeriod": 5000,
}
NUMERIC_KEYS = ("stallInterval", "maxStalls", "gracePeriod")


def merged_config(current: dict[str, Any], update: Any) -> dict[str, Any]:
    """SetStallConfig: numeric fields (numeric strings coerced, null kept, junk dropped) and ``enabled``."""
    out = dict(current)
    if type(update) is not dict:
        return out
    for key, value in update.items():
        if key == "enabled":
            if value is True or value is False:
                out[key] = value
        elif key in NUMERIC_KEYS:
            if value is None:
                out[key] = None
            else:
                number = js_finite(value)
                if number is not None:
                    out[key] = wire_number(number)
    return out

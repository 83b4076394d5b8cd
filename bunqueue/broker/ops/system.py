"""What the broker tells of itself outside any queue: StorageStatus."""
from __future__ import annotations

from typing import Any

from bunqueue.broker.wiring import Wiring


def storage_status(broker: Wiring) -> dict[str, Any]:
    """The store's health as StorageStatus and the dashboards show it (a copy)."""
    return dict(broker.store.status)

"""What a PostgreSQL broker tells of itself outside any queue: StorageStatus."""
from __future__ import annotations

from typing import Any

from bunqueue import errors
from bunqueue.storage.postgres.figures import FigureReader
from bunqueue.storage.postgres.ops.family import Family
from bunqueue.storage.postgres.ops.monitoring import STORAGE_OK
from bunqueue.storage.postgres.pool import UNREACHABLE, reason


class SystemFamily(Family):
    figure_reader: FigureReader

    async def storage_status(self) -> dict[str, Any]:
        """The store's health (a copy). The health probe reads the totals right after it: they are read
        again here, so that a probe shows what the database holds now, not a second ago. A database this
        broker cannot reach makes it unhealthy (``reachable`` false: /health and /ready answer 503)."""
        try:
            await self.figure_reader.read()
        except UNREACHABLE as exc:
            return {"diskFull": False, "error": errors.storage_unavailable(reason(exc)), "since": self.clock(),
                    "reachable": False}
        return dict(STORAGE_OK)

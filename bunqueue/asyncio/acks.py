"""Completed jobs acknowledged together: one ACKB per ``max_size`` jobs or per ``max_delay_ms``."""
from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from bunqueue.client.options import compact
from bunqueue.client.transport import Transport

#: Called once the batch is settled: None when acknowledged, else the error.
Settle = Callable[[BaseException | None], None]


class AckBatcher:
    def __init__(self, transport: Transport, max_size: int = 50, max_delay_ms: float = 5) -> None:
        self.transport = transport
        self.max_size = max(1, max_size)
        self.max_delay_s = max_delay_ms / 1000.0
        self.buffer: list[tuple[str, str | None, Any, Settle]] = []
        self.timer: asyncio.TimerHandle | None = None
        self.flushing: set[asyncio.Task[None]] = set()

    def add(self, job_id: str, token: str | None, result: Any, settle: Settle) -> None:
        self.buffer.append((job_id, token, result, settle))
        if len(self.buffer) >= self.max_size:
            self._flush_soon()
        elif self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(self.max_delay_s, self._flush_soon)

    def _flush_soon(self) -> None:
        task = asyncio.ensure_future(self.flush())
        self.flushing.add(task)
        task.add_done_callback(self.flushing.discard)

    async def flush(self) -> None:
        """Send what is buffered now; settle each item with the outcome."""
        if self.timer is not None:
            self.timer.cancel()
            self.timer = None
        batch, self.buffer = self.buffer, []
        if not batch:
            return
        error: BaseException | None = None
        try:
            await self.transport.call(compact({
                "cmd": "ACKB",
                "ids": [item[0] for item in batch],
                "tokens": [item[1] for item in batch],
                "results": [item[2] for item in batch],
            }))
        except Exception as exc:  # noqa: BLE001 - every item is settled with it
            error = exc
        for item in batch:
            item[3](error)

    async def drain(self) -> None:
        """Flush the buffer and wait for the batches already on their way."""
        await self.flush()
        if self.flushing:
            await asyncio.gather(*self.flushing, return_exceptions=True)

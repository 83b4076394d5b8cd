"""The synchronous FlowProducer: one atomic PUSHF per call, as the asyncio one."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from bunqueue.asyncio import flow as aio
from bunqueue.asyncio.flow import FlowNode
from bunqueue.client.connectionoptions import DEFAULT_PORT, TlsOption
from bunqueue.sdk.blocking import blocking
from bunqueue.sdk.job import Job
from bunqueue.sdk.sharedconnection import Connection, shared_transport
from bunqueue.sdk.telemetry import TelemetryHandler

__all__ = ("FlowNode", "FlowProducer")


class _SdkFlowProducer(aio.FlowProducer):
    def _job(self, raw: dict[str, Any]) -> Job:
        return Job(raw, self.transport)


class FlowProducer:
    """Adds trees of jobs (a parent runs after its children) to any queues; see
    ``bunqueue.asyncio.FlowProducer`` for the tree's shape."""

    def __init__(
        self,
        host: str = "localhost",
        port: int = DEFAULT_PORT,
        token: str | None = None,
        tls: TlsOption = None,
        connection: Connection | None = None,
        on_telemetry: TelemetryHandler | None = None,
        *,
        embedded: bool = False,
        data_path: str | None = None,
    ) -> None:
        self._aio = _SdkFlowProducer(host, port, token, tls, shared_transport(connection), on_telemetry,
                                     embedded=embedded, data_path=data_path)
        self.connection = connection or Connection.over(self._aio.transport)

    add: Callable[..., FlowNode] = blocking(aio.FlowProducer.add)
    add_bulk: Callable[..., list[FlowNode]] = blocking(aio.FlowProducer.add_bulk)
    add_chain = blocking(aio.FlowProducer.add_chain)
    add_bulk_then = blocking(aio.FlowProducer.add_bulk_then)
    get_flow: Callable[..., FlowNode | None] = blocking(aio.FlowProducer.get_flow)
    close = blocking(aio.FlowProducer.close)

    def __enter__(self) -> FlowProducer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

"""Every tool of the server, by family, in the original's order."""
from __future__ import annotations

from bunqueue.mcp.adapter import Adapter
from bunqueue.mcp.handlers import HandlerRegistry
from bunqueue.mcp.schema import Tool
from bunqueue.mcp.tools import (
    consumer_tools,
    flow_tools,
    handler_tools,
    job_tools,
    monitor_tools,
    queue_tools,
    service_tools,
)


def all_tools(adapter: Adapter, registry: HandlerRegistry) -> list[Tool]:
    return [
        *job_tools.tools(adapter),
        *consumer_tools.tools(adapter),
        *queue_tools.tools(adapter),
        *service_tools.tools(adapter),
        *monitor_tools.tools(adapter),
        *flow_tools.tools(adapter),
        *handler_tools.tools(registry),
    ]

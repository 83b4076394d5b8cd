"""HTTP handler tools: a worker per queue that processes each job with an HTTP request."""
from __future__ import annotations

from typing import Any

from bunqueue.mcp import shapes
from bunqueue.mcp.handlers import DEFAULT_TIMEOUT_MS, Handler, HandlerRegistry
from bunqueue.mcp.schema import Tool, anything, enum, number, record, string

METHODS = ("GET", "POST", "PUT", "DELETE")


def tools(registry: HandlerRegistry) -> list[Tool]:
    async def register_handler(a: dict[str, Any]) -> str:
        queue, url, method = a["queue"], a["url"], a["method"]
        await registry.register(queue, Handler(url, method, a.get("headers") or {}, a.get("body"), a.get("timeoutMs")))
        return shapes.text({
            "success": True,
            "queue": queue,
            "handler": {"url": url, "method": method, "timeoutMs": a.get("timeoutMs") or DEFAULT_TIMEOUT_MS},
            "message": f'Worker started. Jobs in "{queue}" will be processed via {method} {url}',
        }, pretty=True)

    async def unregister_handler(a: dict[str, Any]) -> str:
        return shapes.text({"success": await registry.unregister(a["queue"]), "queue": a["queue"]})

    async def list_handlers(a: dict[str, Any]) -> str:
        handlers = registry.list()
        return shapes.text({"count": len(handlers), "handlers": handlers}, pretty=True)

    return [
        Tool("bunqueue_register_handler",
             "Register an HTTP handler on a queue. Spawns a worker that auto-processes jobs by making HTTP requests. "
             "Combine with bunqueue_add_cron for recurring tasks.", {
                 "queue": string("Queue name to attach the handler to"),
                 "url": string("HTTP endpoint URL to call when a job is processed", url=True),
                 "method": enum(METHODS, "HTTP method (GET, POST, PUT, DELETE)"),
                 "headers": record("Custom HTTP headers", values={"type": "string"}),
                 "body": anything("Request body template for POST/PUT (defaults to job data)"),
                 "timeoutMs": number("Request timeout in ms (default: 30000)", minimum=1000, maximum=120000),
             }, ("queue", "url", "method"), register_handler),
        Tool("bunqueue_unregister_handler", "Remove an HTTP handler from a queue and stop its worker.",
             {"queue": string("Queue name to remove the handler from")}, ("queue",), unregister_handler),
        Tool("bunqueue_list_handlers", "List all active HTTP handlers and their workers.", {}, (), list_handlers),
    ]

"""Cron, webhook and worker tools."""
from __future__ import annotations

import time
from typing import Any

from bunqueue import errors
from bunqueue.mcp import shapes
from bunqueue.mcp.adapter import Adapter, ToolFailure
from bunqueue.mcp.schema import Tool, array, boolean, enum, number, record, string

#: The events a webhook may subscribe to through MCP (the original's WEBHOOK_EVENTS).
WEBHOOK_EVENTS = ("job.pushed", "job.started", "job.completed", "job.failed", "job.progress")


async def list_crons(adapter: Adapter) -> list[dict[str, Any]]:
    return [shapes.cron(raw) for raw in (await adapter.call({"cmd": "CronList"})).get("crons") or []]


async def list_workers(adapter: Adapter) -> list[dict[str, Any]]:
    reply = await adapter.call({"cmd": "ListWorkers"})
    workers = _data(reply).get("workers") or reply.get("workers") or []
    return [shapes.worker(raw) for raw in workers]


async def list_webhooks(adapter: Adapter) -> list[dict[str, Any]]:
    reply = await adapter.call({"cmd": "ListWebhooks"})
    webhooks = _data(reply).get("webhooks") or reply.get("webhooks") or []
    return [shapes.webhook(raw) for raw in webhooks]


def _data(reply: dict[str, Any]) -> dict[str, Any]:
    data = reply.get("data")
    return data if isinstance(data, dict) else {}


def tools(adapter: Adapter) -> list[Tool]:
    send, call, succeeded = adapter.send, adapter.call, adapter.succeeded

    async def add_cron(a: dict[str, Any]) -> str:
        reply = await call({"cmd": "Cron", "name": a["name"], "queue": a["queue"], "data": a["data"],
                            "schedule": a.get("schedule"), "repeatEvery": a.get("repeatEvery"),
                            "priority": a.get("priority"), "jobName": "default"})
        return shapes.text({"success": True, **shapes.cron(reply.get("cron") or {})}, pretty=True)

    async def list_crons_tool(a: dict[str, Any]) -> str:
        crons = await list_crons(adapter)
        return shapes.text({"count": len(crons), "crons": crons}, pretty=True)

    async def get_cron(a: dict[str, Any]) -> str:
        reply = await send({"cmd": "CronGet", "name": a["name"]})
        if not reply.get("ok") or not reply.get("cron"):
            raise ToolFailure(errors.MCP_CRON_NOT_FOUND, name=a["name"])
        return shapes.text(shapes.cron(reply["cron"]), pretty=True)

    async def delete_cron(a: dict[str, Any]) -> str:
        return shapes.text({"success": await succeeded({"cmd": "CronDelete", "name": a["name"]}), "name": a["name"]})

    async def add_webhook(a: dict[str, Any]) -> str:
        reply = await call({"cmd": "AddWebhook", "url": a["url"], "events": a["events"], "queue": a.get("queue")})
        data = _data(reply)
        hook_id = data.get("webhookId") or data.get("id") or reply.get("id")
        hook = shapes.webhook({"id": hook_id, "url": a["url"], "events": a["events"], "queue": a.get("queue")})
        return shapes.text({"success": True, **hook}, pretty=True)

    async def remove_webhook(a: dict[str, Any]) -> str:
        return shapes.text({"success": await succeeded({"cmd": "RemoveWebhook", "id": a["id"]}), "id": a["id"]})

    async def list_webhooks_tool(a: dict[str, Any]) -> str:
        hooks = await list_webhooks(adapter)
        return shapes.text({"count": len(hooks), "webhooks": hooks}, pretty=True)

    async def set_webhook_enabled(a: dict[str, Any]) -> str:
        success = await succeeded({"cmd": "SetWebhookEnabled", "id": a["id"], "enabled": a["enabled"]})
        return shapes.text({"success": success, "id": a["id"], "enabled": a["enabled"]})

    async def register_worker(a: dict[str, Any]) -> str:
        reply = await call({"cmd": "RegisterWorker", "name": a["name"], "queues": a["queues"]})
        data = _data(reply)
        worker = shapes.worker({"lastSeen": time.time() * 1000, **data, "name": a["name"], "queues": a["queues"]})
        return shapes.text({"success": True, "worker": worker}, pretty=True)

    async def unregister_worker(a: dict[str, Any]) -> str:
        success = await succeeded({"cmd": "UnregisterWorker", "workerId": a["workerId"]})
        return shapes.text({"success": success, "workerId": a["workerId"]})

    async def worker_heartbeat(a: dict[str, Any]) -> str:
        success = await succeeded({"cmd": "Heartbeat", "id": a["workerId"]})
        return shapes.text({"success": success, "workerId": a["workerId"]})

    return [
        Tool("bunqueue_add_cron", "Add a recurring cron job. Use either a cron pattern or repeatEvery interval.", {
            "name": string("Unique cron job name"),
            "queue": string("Target queue name"),
            "data": record("Job payload data"),
            "schedule": string('Cron pattern (e.g., "0 * * * *" for hourly)'),
            "repeatEvery": number("Alternative: repeat every N milliseconds"),
            "priority": number("Job priority"),
        }, ("name", "queue", "data"), add_cron),
        Tool("bunqueue_list_crons", "List all scheduled cron jobs with their next run times.", {}, (), list_crons_tool),
        Tool("bunqueue_get_cron", "Get details of a specific cron job by name.", {"name": string("Cron job name")},
             ("name",), get_cron),
        Tool("bunqueue_delete_cron", "Delete a cron job by name.", {"name": string("Cron job name to delete")},
             ("name",), delete_cron),
        Tool("bunqueue_add_webhook", "Add a webhook to receive notifications for job events.", {
            "url": string("Webhook URL to receive POST requests", url=True),
            "events": array(enum(WEBHOOK_EVENTS), "Events to subscribe to"),
            "queue": string("Limit to a specific queue (omit for all queues)"),
        }, ("url", "events"), add_webhook),
        Tool("bunqueue_remove_webhook", "Remove a webhook by ID.", {"id": string("Webhook ID to remove")}, ("id",),
             remove_webhook),
        Tool("bunqueue_list_webhooks", "List all registered webhooks.", {}, (), list_webhooks_tool),
        Tool("bunqueue_set_webhook_enabled", "Enable or disable a webhook without removing it.", {
            "id": string("Webhook ID"),
            "enabled": boolean("Whether the webhook should be enabled"),
        }, ("id", "enabled"), set_webhook_enabled),
        Tool("bunqueue_register_worker", "Register a new worker to process jobs from specified queues.", {
            "name": string("Worker name/identifier"),
            "queues": array(string(), "Queues this worker will process", min_items=1),
        }, ("name", "queues"), register_worker),
        Tool("bunqueue_unregister_worker", "Unregister a worker, removing it from the active workers list.",
             {"workerId": string("Worker ID to unregister")}, ("workerId",), unregister_worker),
        Tool("bunqueue_worker_heartbeat", "Send a heartbeat to keep a registered worker alive.",
             {"workerId": string("Worker ID")}, ("workerId",), worker_heartbeat),
    ]

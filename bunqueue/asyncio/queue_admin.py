"""Queue administration: dead-letter queue, stall and rate settings, job schedulers, webhooks, monitoring."""
from __future__ import annotations

from typing import Any

from bunqueue.client.options import compact, scheduler_command
from bunqueue.client.transport import Reply, Transport
from bunqueue.errors import RemoteCommandError


def _listed(reply: Reply, key: str) -> list[Any]:
    data = reply.get("data")
    if isinstance(data, dict):
        return list(data.get(key) or [])
    return list(reply.get(key) or [])


class QueueAdminOps:
    name: str
    transport: Transport

    def _scheduled(self, name: str, data: Any) -> dict[str, Any]:
        """The template name and data fields of a Cron command as this API sends them."""
        return {"jobName": name, "data": data}

    async def _count(self, command: dict[str, Any]) -> int:
        raise NotImplementedError

    # -- dead-letter queue ----------------------------------------------------------------------------

    async def get_dlq(self, count: int | None = None) -> list[dict[str, Any]]:
        reply = await self.transport.call(compact({"cmd": "Dlq", "queue": self.name, "count": count}))
        return list(reply.get("jobs") or reply.get("data") or [])

    async def retry_dlq(self, job_id: str | None = None, count: int | None = None) -> int:
        """Retry one entry, or up to ``count`` (all by default); how many went back to the queue."""
        return await self._count({"cmd": "RetryDlq", "queue": self.name, "jobId": job_id, "count": count})

    async def purge_dlq(self) -> int:
        return await self._count({"cmd": "PurgeDlq", "queue": self.name})

    async def set_dlq_config(self, config: dict[str, Any]) -> None:
        await self.transport.call({"cmd": "SetDlqConfig", "queue": self.name, "config": config})

    async def get_dlq_config(self) -> dict[str, Any]:
        reply = await self.transport.call({"cmd": "GetDlqConfig", "queue": self.name})
        return dict(reply.get("config") or reply.get("data") or {})

    async def set_stall_config(self, config: dict[str, Any]) -> None:
        await self.transport.call({"cmd": "SetStallConfig", "queue": self.name, "config": config})

    async def get_stall_config(self) -> dict[str, Any]:
        reply = await self.transport.call({"cmd": "GetStallConfig", "queue": self.name})
        return dict(reply.get("config") or reply.get("data") or {})

    # -- rate limit and concurrency -------------------------------------------------------------------

    async def set_global_rate_limit(self, max_jobs: int, duration_ms: int | None = None) -> None:
        """``duration_ms`` is accepted for the TS signature; the wire carries only the limit."""
        await self.transport.call({"cmd": "RateLimit", "queue": self.name, "limit": max_jobs})

    async def remove_global_rate_limit(self) -> None:
        await self.transport.call({"cmd": "RateLimitClear", "queue": self.name})

    async def set_global_concurrency(self, concurrency: int) -> None:
        await self.transport.call({"cmd": "SetConcurrency", "queue": self.name, "limit": concurrency})

    async def remove_global_concurrency(self) -> None:
        await self.transport.call({"cmd": "ClearConcurrency", "queue": self.name})

    # -- job schedulers -------------------------------------------------------------------------------

    async def upsert_job_scheduler(
        self, scheduler_id: str, repeat: dict[str, Any], template: dict[str, Any] | None = None
    ) -> None:
        """Create or replace a scheduler. ``repeat``: ``pattern`` (cron) or ``every`` (ms), ``tz``,
        ``immediately``, ``limit``, ``skip_if_no_worker``, ``skip_missed_on_restart``,
        ``prevent_overlap``; ``template``: ``{"name", "data", "opts"}`` of the jobs it adds."""
        template = template or {}
        payload = self._scheduled(template.get("name", scheduler_id), template.get("data"))
        await self.transport.call(scheduler_command(self.name, scheduler_id, repeat, template, payload))

    async def remove_job_scheduler(self, scheduler_id: str) -> None:
        await self.transport.call({"cmd": "CronDelete", "name": scheduler_id})

    async def get_job_scheduler(self, scheduler_id: str) -> dict[str, Any] | None:
        try:
            reply = await self.transport.call({"cmd": "CronGet", "name": scheduler_id})
        except RemoteCommandError as exc:
            if "not found" in str(exc).lower():
                return None
            raise
        cron = reply.get("cron") or reply.get("data")
        return dict(cron) if cron else None

    async def get_job_schedulers(self) -> list[dict[str, Any]]:
        reply = await self.transport.call({"cmd": "CronList"})
        return [dict(c) for c in reply.get("crons", []) if c.get("queue") == self.name]

    async def get_job_schedulers_count(self) -> int:
        return len(await self.get_job_schedulers())

    async def add_cron(self, name: str, schedule: str, data: Any = None, **repeat: Any) -> None:
        """A scheduler on a cron pattern, adding jobs called ``name``."""
        await self.upsert_job_scheduler(name, {"pattern": schedule, **repeat}, {"name": name, "data": data})

    async def every(self, name: str, interval_ms: int, data: Any = None, **repeat: Any) -> None:
        """A scheduler adding a job called ``name`` every ``interval_ms``."""
        await self.upsert_job_scheduler(name, {"every": interval_ms, **repeat}, {"name": name, "data": data})

    # -- webhooks -------------------------------------------------------------------------------------

    async def add_webhook(
        self, url: str, events: list[str], queue: str | None = None, secret: str | None = None
    ) -> str | None:
        reply = await self.transport.call(compact({"cmd": "AddWebhook", "url": url, "events": events,
                                                   "queue": queue, "secret": secret}))
        data = reply["data"] if isinstance(reply.get("data"), dict) else reply
        webhook_id = data.get("webhookId") or data.get("id")
        return str(webhook_id) if webhook_id else None

    async def remove_webhook(self, webhook_id: str) -> None:
        await self.transport.call({"cmd": "RemoveWebhook", "webhookId": webhook_id})

    async def list_webhooks(self) -> list[dict[str, Any]]:
        return _listed(await self.transport.call({"cmd": "ListWebhooks"}), "webhooks")

    async def set_webhook_enabled(self, webhook_id: str, enabled: bool) -> None:
        await self.transport.call({"cmd": "SetWebhookEnabled", "id": webhook_id, "enabled": enabled})

    # -- monitoring -----------------------------------------------------------------------------------

    async def get_workers(self) -> list[dict[str, Any]]:
        return _listed(await self.transport.call({"cmd": "ListWorkers"}), "workers")

    async def get_workers_count(self) -> int:
        return len(await self.get_workers())

    async def get_stats(self) -> dict[str, Any]:
        return dict((await self.transport.call({"cmd": "Stats"})).get("stats", {}))

    async def get_metrics(self) -> dict[str, Any]:
        return dict((await self.transport.call({"cmd": "Metrics"})).get("metrics", {}))

    async def list_queues(self) -> list[Any]:
        reply = await self.transport.call({"cmd": "ListQueues"})
        return list(reply.get("queues") or reply.get("data") or [])

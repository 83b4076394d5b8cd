"""HTTP handler tools: a worker that sends each job to a URL, under the webhook URL rules."""
from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from aiohttp import web

from bunqueue._testbase.server import free_port
from tests.mcp.stdio_client import mcp_server


@asynccontextmanager
async def receiver(seen: list[dict[str, Any]]) -> AsyncIterator[str]:
    """A JSON endpoint on loopback that records each request and echoes its body."""

    async def handle(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append({"method": request.method, "body": body, "header": request.headers.get("X-Token")})
        return web.json_response({"got": body})

    app = web.Application()
    app.router.add_route("*", "/hook", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/hook"
    finally:
        await runner.cleanup()


async def test_a_loopback_handler_is_refused_as_a_webhook_would_be() -> None:
    async with mcp_server() as mcp:
        refused = await mcp.error("bunqueue_register_handler",
                                  {"queue": "h", "url": "http://127.0.0.1:9/x", "method": "POST"})
        assert refused == '{"error":"Webhook URL cannot point to localhost"}'
        assert await mcp.ok("bunqueue_list_handlers") == {"count": 0, "handlers": []}


async def test_a_handler_posts_each_job_and_completes_it_with_the_answer() -> None:
    seen: list[dict[str, Any]] = []
    async with receiver(seen) as url, mcp_server({"WEBHOOK_ALLOW_PRIVATE": "1"}) as mcp:
        registered = await mcp.ok("bunqueue_register_handler", {
            "queue": "hooks", "url": url, "method": "POST", "headers": {"X-Token": "t1"}})
        assert registered == {
            "success": True, "queue": "hooks", "handler": {"url": url, "method": "POST", "timeoutMs": 30000},
            "message": f'Worker started. Jobs in "hooks" will be processed via POST {url}'}
        listed = await mcp.ok("bunqueue_list_handlers")
        assert listed == {"count": 1, "handlers": [{"queue": "hooks", "active": True, "handler": {
            "url": url, "method": "POST", "headers": {"X-Token": "t1"}}}]}

        job_id = (await mcp.ok("bunqueue_add_job", {"queue": "hooks", "name": "n", "data": {"k": 1}}))["jobId"]
        assert await mcp.ok("bunqueue_wait_for_job", {"jobId": job_id, "timeoutMs": 10000}) == {
            "jobId": job_id, "completed": True}
        assert seen == [{"method": "POST", "body": {"k": 1}, "header": "t1"}]
        assert await mcp.ok("bunqueue_get_job_result", {"jobId": job_id}) == {
            "jobId": job_id, "result": {"status": 200, "body": {"got": {"k": 1}}}}

        assert await mcp.ok("bunqueue_unregister_handler", {"queue": "hooks"}) == {"success": True, "queue": "hooks"}
        assert await mcp.ok("bunqueue_unregister_handler", {"queue": "hooks"}) == {"success": False, "queue": "hooks"}

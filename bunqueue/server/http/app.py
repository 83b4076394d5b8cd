"""The HTTP handler behind `--http-port` (on aiohttp's low-level server), in the order the Bun original answers:

1. `OPTIONS` anywhere: CORS preflight (204). 2. `/health`, `/healthz`, `/live`, `/ready`: open, not
rate limited. 3. `POST /gc`, `GET /heapstats`: token. 4. the rate limit. 5. `/ws...`, `/events...`:
streams. 6. `GET /prometheus`: open unless METRICS_AUTH. 7. everything else: token, then the route
table (no match, wrong method included, is 404).

Commands run through the same executor as TCP frames; this module only translates.
"""
from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bunqueue import errors
from bunqueue.server.http import routes
from bunqueue.server.http.answers import Answers
from bunqueue.server.http.encoding import dumps
from bunqueue.server.http.streams import EventFeed
from bunqueue.server.ratelimit import RequestRateLimiter
from bunqueue.server.runner import check_token

Executor = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
HEALTH_PATHS = frozenset({"/health", "/healthz", "/live", "/ready"})
JSON_TYPE = "application/json"
PREFLIGHT_HEADERS = {
    "Access-Control-Allow-Methods": "GET, POST, PUT, DELETE, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, Authorization",
    "Access-Control-Max-Age": "86400",
}
MAX_BODY_BYTES = 64 * 1024 * 1024


class HttpApi:
    def __init__(self, execute: Executor, answers: Answers, feed: EventFeed, *, tokens: frozenset[str],
                 cors_origins: str, metrics_auth: bool, rate_limit: int, rate_window_ms: int) -> None:
        self.execute = execute
        self.answers = answers
        self.feed = feed
        self.tokens = tokens
        self.origin = cors_origins
        self.metrics_auth = metrics_auth
        self.rate_limit = rate_limit
        self.rate_window_ms = rate_window_ms
        self.limiters: dict[str, RequestRateLimiter] = {}

    # -- responses ---------------------------------------------------------------------------------

    def json(self, doc: Any, status: int = 200, *, cors: bool = True) -> web.Response:
        headers = {"Content-Type": JSON_TYPE}
        if cors:
            headers["Access-Control-Allow-Origin"] = self.origin
        return web.Response(body=dumps(doc).encode(), status=status, headers=headers)

    def error(self, message: str, status: int, *, cors: bool = True) -> web.Response:
        return self.json({"ok": False, "error": message}, status, cors=cors)

    def text(self, body: str, status: int = 200, content_type: str = "text/plain;charset=utf-8", *,
             cors: bool = True) -> web.Response:
        headers = {"Content-Type": content_type}
        if cors:
            headers["Access-Control-Allow-Origin"] = self.origin
        return web.Response(body=body.encode(), status=status, headers=headers)

    # -- checks ------------------------------------------------------------------------------------

    def authorized(self, request: web.BaseRequest) -> bool:
        if not self.tokens:
            return True
        header = request.headers.get("Authorization", "")
        # The original removes the first "Bearer " wherever it stands and compares the rest.
        token = header.replace("Bearer ", "", 1)
        return check_token(token, self.tokens)

    def allowed(self, request: web.BaseRequest) -> bool:
        if self.rate_limit <= 0:
            return True
        forwarded = request.headers.get("X-Forwarded-For")
        key = forwarded.split(",")[0].strip() if forwarded else request.headers.get("X-Real-IP", "unknown")
        limiter = self.limiters.get(key)
        if limiter is None:
            limiter = self.limiters[key] = RequestRateLimiter(self.rate_limit, self.rate_window_ms)
        return limiter.allow()

    # -- dispatch ----------------------------------------------------------------------------------

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        path = request.rel_url.raw_path
        method = request.method
        if method == "OPTIONS":
            return web.Response(status=204, headers={"Access-Control-Allow-Origin": self.origin, **PREFLIGHT_HEADERS})
        if path in HEALTH_PATHS:
            return await self.health(path)
        debug = (method, path) in (("POST", "/gc"), ("GET", "/heapstats"))
        if debug or path in ("/ws", "/events") or path.startswith(("/ws/", "/events/")) or (
                method == "GET" and path == "/prometheus"):
            return await self.special_paths(request, method, path)
        if not self.allowed(request):
            return self.error(errors.RATE_LIMIT_EXCEEDED, 429, cors=False)
        if not self.authorized(request):
            return self.error("Unauthorized", 401, cors=False)
        try:
            found = routes.match(method, path)
        except routes.BadEscape:
            return self.error("URI error", 500, cors=False)
        if found is None:
            return self.error("Not found", 404)
        route, params = found
        url = request.rel_url
        query = {key: url.query.getall(key) for key in url.query} if url.raw_query_string else {}
        body = await self.body(request, route)
        if body is None:
            return self.error("Invalid JSON body", 400)
        if route.special is not None:
            doc, status = await self.answers.special(route.special, params, url.query, body)
            return self.json(doc, status)
        assert route.build is not None
        reply = await self.execute(route.build(params, query, body))
        reply.pop("reqId", None)
        return self.json(reply, routes.status_for(route, reply))

    async def special_paths(self, request: web.BaseRequest, method: str, path: str) -> web.StreamResponse:
        if method == "GET" and path == "/prometheus":
            if self.metrics_auth:
                if not self.tokens:
                    return self.error("Metrics authentication is enabled but no tokens are configured", 503,
                                      cors=False)
                if not self.authorized(request):
                    return self.error("Unauthorized", 401, cors=False)
            text = await self.answers.prometheus()
            return self.text(text, content_type="text/plain; version=0.0.4; charset=utf-8")
        if path in ("/gc", "/heapstats"):
            if not self.authorized(request):
                return self.error("Unauthorized", 401, cors=False)
            doc = await (self.answers.gc() if path == "/gc" else self.answers.heapstats())
            return self.json(doc)
        if not self.allowed(request):
            return self.error(errors.RATE_LIMIT_EXCEEDED, 429, cors=False)
        if not self.authorized(request):
            return self.error("Unauthorized", 401, cors=False)
        queue = path.split("/queues/", 1)[1] if "/queues/" in path else None
        if path == "/ws" or path.startswith("/ws/"):
            return await self.feed.websocket(request, queue, self.feed.handle_text)
        return await self.feed.sse(request, queue)

    async def body(self, request: web.BaseRequest, route: routes.Route) -> dict[str, Any] | None:
        """The JSON body as the route reads it; None when it is not valid JSON."""
        if route.body == routes.IGNORED or request.method in ("GET", "DELETE"):
            return {}
        raw = await request.read()
        text = raw.decode("utf-8", errors="replace")
        if not text.strip():
            return None if route.body == routes.REQUIRED else {}
        try:
            doc = json.loads(text)
        except ValueError:
            return {} if route.body == routes.LENIENT else None
        # A body that is JSON but not an object has no fields to read: refused like unreadable JSON.
        return doc if isinstance(doc, dict) else None

    async def health(self, path: str) -> web.Response:
        if path in ("/healthz", "/live"):
            return self.text("OK")
        doc, status = await (self.answers.health() if path == "/health" else self.answers.ready())
        return self.json(doc, status)


def build_server(api: HttpApi) -> web.Server:
    """aiohttp's low-level server with `HttpApi.handle` as its one handler: the handler routes every
    request itself, so an application's router and middleware chain would only add work per request.
    A client that goes away cancels its handler: an event stream leaves at once, a long-poll stops."""
    loop = asyncio.get_running_loop()

    def make_request(message: Any, payload: Any, protocol: Any, writer: Any, task: Any) -> web.BaseRequest:
        return web.BaseRequest(message, payload, protocol, writer, task, loop, client_max_size=MAX_BODY_BYTES)

    return web.Server(api.handle, request_factory=make_request, handler_cancellation=True, access_log=None)

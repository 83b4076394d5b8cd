"""The aiohttp application behind `--http-port`, in the order the Bun original answers:

1. `OPTIONS` anywhere: CORS preflight (204). 2. `/health`, `/healthz`, `/live`, `/ready`: open, not
rate limited. 3. `POST /gc`, `GET /heapstats`: token. 4. the rate limit. 5. `/ws...`, `/events...`:
streams. 6. `GET /prometheus`: open unless METRICS_AUTH. 7. everything else: token, then the route
table (no match, wrong method included, is 404).

Commands run through the same executor as TCP frames; this module only translates.
"""
from __future__ import annotations

import json
import math
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from bunqueue import errors
from bunqueue.http import routes
from bunqueue.http.answers import Answers
from bunqueue.server.ratelimit import RequestRateLimiter

Executor = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
HEALTH_PATHS = frozenset({"/health", "/healthz", "/live", "/ready"})
JSON_TYPE = "application/json"
PREFLIGHT_HEADERS = {
    "Access-Control-Allow-Methods": "GET, POST, PUT, DELETE, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, Authorization",
    "Access-Control-Max-Age": "86400",
}
MAX_BODY_BYTES = 64 * 1024 * 1024


def _json_default(value: Any) -> Any:
    # JS `undefined` inside data or results has no JSON form: it reads as absent (null in arrays).
    if isinstance(value, bytes):
        return None
    return None


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def dumps(doc: Any) -> str:
    return json.dumps(_finite(doc), separators=(",", ":"), default=_json_default, ensure_ascii=False)


class HttpApi:
    def __init__(self, execute: Executor, answers: Answers, *, tokens: frozenset[str], cors_origins: str,
                 metrics_auth: bool, rate_limit: int, rate_window_ms: int) -> None:
        self.execute = execute
        self.answers = answers
        self.tokens = tokens
        self.origin = cors_origins
        self.metrics_auth = metrics_auth
        self.rate_limit = rate_limit
        self.rate_window_ms = rate_window_ms
        self.limiters: dict[str, RequestRateLimiter] = {}

    # -- responses ---------------------------------------------------------------------------------

    def json(self, doc: Any, status: int = 200, *, cors: bool = True) -> web.Response:
        headers = {"Access-Control-Allow-Origin": self.origin} if cors else {}
        return web.Response(text=dumps(doc), status=status, content_type=JSON_TYPE, headers=headers)

    def error(self, message: str, status: int, *, cors: bool = True) -> web.Response:
        return self.json({"ok": False, "error": message}, status, cors=cors)

    def text(self, body: str, status: int = 200, content_type: str = "text/plain", *, cors: bool = True,
             charset: str | None = "utf-8") -> web.Response:
        headers = {"Access-Control-Allow-Origin": self.origin} if cors else {}
        return web.Response(text=body, status=status, content_type=content_type, charset=charset, headers=headers)

    # -- checks ------------------------------------------------------------------------------------

    def authorized(self, request: web.Request) -> bool:
        if not self.tokens:
            return True
        header = request.headers.get("Authorization", "")
        # The original removes the first "Bearer " wherever it stands and compares the rest.
        token = header.replace("Bearer ", "", 1)
        from bunqueue.server.tcp import check_token

        return check_token(token, self.tokens)

    def allowed(self, request: web.Request) -> bool:
        if self.rate_limit <= 0:
            return True
        forwarded = request.headers.get("X-Forwarded-For")
        key = forwarded.split(",")[0].strip() if forwarded else request.headers.get("X-Real-IP", "unknown")
        limiter = self.limiters.get(key)
        if limiter is None:
            limiter = self.limiters[key] = RequestRateLimiter(self.rate_limit, self.rate_window_ms)
        return limiter.allow()

    # -- dispatch ----------------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
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
        body = await self.body(request, route)
        if body is None:
            return self.error("Invalid JSON body", 400)
        if route.special is not None:
            doc, status = await self.answers.special(route.special, params, request.rel_url.query, body)
            return self.json(doc, status)
        reply = await self.execute(route.build(params, request.rel_url.query, body))  # type: ignore[misc]
        reply.pop("reqId", None)
        return self.json(reply, routes.status_for(route, reply))

    async def special_paths(self, request: web.Request, method: str, path: str) -> web.StreamResponse:
        if method == "GET" and path == "/prometheus":
            if self.metrics_auth:
                if not self.tokens:
                    return self.error("Metrics authentication is enabled but no tokens are configured", 503,
                                      cors=False)
                if not self.authorized(request):
                    return self.error("Unauthorized", 401, cors=False)
            text = await self.answers.prometheus()
            return self.text(text, content_type="text/plain; version=0.0.4", charset="utf-8")
        if path in ("/gc", "/heapstats"):
            if not self.authorized(request):
                return self.error("Unauthorized", 401, cors=False)
            doc = await self.answers.gc() if path == "/gc" else self.answers.heapstats()
            return self.json(doc)
        if not self.allowed(request):
            return self.error(errors.RATE_LIMIT_EXCEEDED, 429, cors=False)
        if not self.authorized(request):
            return self.error("Unauthorized", 401, cors=False)
        return await self.answers.stream(request, path)

    async def body(self, request: web.Request, route: routes.Route) -> dict[str, Any] | None:
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
        return doc if isinstance(doc, dict) else {"_": doc}

    async def health(self, path: str) -> web.Response:
        if path in ("/healthz", "/live"):
            return self.text("OK")
        doc, status = await (self.answers.health() if path == "/health" else self.answers.ready())
        return self.json(doc, status)


def build_app(api: HttpApi) -> web.Application:
    app = web.Application(client_max_size=MAX_BODY_BYTES)
    app.router.add_route("*", "/{tail:.*}", api.handle)
    return app

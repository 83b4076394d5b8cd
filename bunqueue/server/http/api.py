"""The HTTP API's requests, in the order the Bun original answers them:

1. `OPTIONS` anywhere: CORS preflight (204). 2. `/health`, `/healthz`, `/live`, `/ready`: open, not
rate limited. 3. `POST /gc`, `GET /heapstats`: token. 4. `GET /prometheus`: open unless METRICS_AUTH.
5. the rate limit. 6. `GET`/`HEAD` under `/ui`: the dashboard's files, open (the page asks for the token
and sends it with every request it makes). 7. the token. 8. `/ws...`, `/events...`: streams. 9. the route
table (no match, wrong method included, is 404).

Commands run through the same runner as TCP frames; this module only translates. A command that answers
at once is answered without a task; one that waits (a long-poll, a change that must reach the disk first)
returns an awaitable answer. Streams are the stream handler's (``streams``): `handle` says so with
``STREAM`` once the rate limit and the token allow the request.
"""
from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from bunqueue import errors
from bunqueue._core.httprequest import HttpRequest
from bunqueue._core.httpresponse import JSON_TYPE, TEXT_TYPE, FixedHeaders, HttpResponse
from bunqueue.broker.components import eventnames
from bunqueue.broker.engine import Engine
from bunqueue.server.http import routes
from bunqueue.server.http.answers import Answers
from bunqueue.server.http.encoding import TooDeep, json_bytes, loads
from bunqueue.server.http.uifiles import UiFiles, is_ui_path
from bunqueue.server.ratelimit import RequestRateLimiter
from bunqueue.server.runner import check_token

Reply = dict[str, Any]
HEALTH_PATHS = frozenset({"/health", "/healthz", "/live", "/ready"})
PREFLIGHT_HEADERS = {
    "Access-Control-Allow-Methods": "GET, POST, PUT, DELETE, OPTIONS",
    "Access-Control-Allow-Headers": "Content-Type, Authorization",
    "Access-Control-Max-Age": "86400",
}
PROMETHEUS_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class StreamRequest:
    """What ``handle`` answers for a `/ws...` or `/events...` request that passed the rate limit and token."""


STREAM = StreamRequest()
Answer = HttpResponse | Awaitable[HttpResponse] | StreamRequest


DEBUG_ROUTES = frozenset({("POST", "/gc"), ("GET", "/heapstats")})
DEBUG_PATHS = frozenset(path for _, path in DEBUG_ROUTES)


# The stream paths and those under them; a path that does not start with one is told apart without a call.
STREAM_PATHS = ("/ws", "/events")
_UNDER_STREAM_PATHS = tuple(path + "/" for path in STREAM_PATHS)


def is_stream_path(path: str) -> bool:
    return path in STREAM_PATHS or path.startswith(_UNDER_STREAM_PATHS)


class HttpApi:
    def __init__(self, now: Callable[[Reply, int], Reply | Awaitable[Reply]], answers: Answers, *,
                 tokens: frozenset[str], cors_origins: str, metrics_auth: bool, rate_limit: int,
                 rate_window_ms: int, engine: Engine | None = None) -> None:
        # A command's reply, or an awaitable of it when the command waits, given the size of the body that
        # carried it (the job-data size check looks at large ones only, as for TCP frames).
        self.now = now
        self.answers = answers
        self.tokens = tokens
        self.origin = cors_origins
        self.metrics_auth = metrics_auth
        self.rate_limit = rate_limit
        self.rate_window_ms = rate_window_ms
        self.limiters: dict[str, RequestRateLimiter] = {}
        self.cors = FixedHeaders({"Access-Control-Allow-Origin": cors_origins})
        self.preflight = FixedHeaders({"Access-Control-Allow-Origin": cors_origins, **PREFLIGHT_HEADERS})
        # Refusals are told to the event streams (ratelimit:hit, auth:failed) while one is open.
        self.engine = engine
        self.ui = UiFiles(auth=bool(tokens))

    # -- responses ---------------------------------------------------------------------------------

    def json(self, doc: Any, status: int = 200, *, cors: bool = True) -> HttpResponse:
        return HttpResponse(status, json_bytes(doc), JSON_TYPE, self.cors if cors else None)

    def error(self, message: str, status: int, *, cors: bool = True) -> HttpResponse:
        return self.json({"ok": False, "error": message}, status, cors=cors)

    def text(self, body: str, status: int = 200, content_type: str = TEXT_TYPE) -> HttpResponse:
        return HttpResponse(status, body.encode(), content_type, self.cors)

    # -- checks ------------------------------------------------------------------------------------

    def authorized(self, authorization: str | None) -> bool:
        if not self.tokens:
            return True
        # The original removes the first "Bearer " wherever it stands and compares the rest.
        token = (authorization or "").replace("Bearer ", "", 1)
        return check_token(token, self.tokens)

    def allowed(self, forwarded: str | None, real_ip: str | None) -> bool:
        """Whether the rate limit (on: ``rate_limit`` > 0) lets the client's request through."""
        key = forwarded.split(",")[0].strip() if forwarded else (real_ip or "unknown")
        limiter = self.limiters.get(key)
        if limiter is None:
            limiter = self.limiters[key] = RequestRateLimiter(self.rate_limit, self.rate_window_ms)
        if limiter.allow():
            return True
        if self.engine is not None and self.engine.hears_system_events():
            self.engine.system_event(eventnames.RATELIMIT_HIT, {"clientId": key})
        return False

    # -- dispatch ----------------------------------------------------------------------------------

    def handle(self, request: HttpRequest) -> Answer:
        path = request.path
        method = request.method
        if method == "OPTIONS":
            return HttpResponse(204, b"", None, self.preflight)
        if path in HEALTH_PATHS:
            return self.health(path)
        headers = request.headers
        if path in DEBUG_PATHS and (method, path) in DEBUG_ROUTES:
            if not self.authorized(headers.get("authorization")):
                return self.error("Unauthorized", 401, cors=False)
            return self._debug(path)
        if method == "GET" and path == "/prometheus":
            return self.prometheus(headers.get("authorization"))
        if self.rate_limit > 0 and not self.allowed(headers.get("x-forwarded-for"), headers.get("x-real-ip")):
            return self.error(errors.RATE_LIMIT_EXCEEDED, 429, cors=False)
        if method in ("GET", "HEAD") and is_ui_path(path):
            return self.ui.answer(path, headers.get("if-none-match"))
        if self.tokens and not self.authorized(headers.get("authorization")):
            # A refused stream is not told, as in the original.
            if self.engine is not None and self.engine.hears_system_events() and not is_stream_path(path):
                self.engine.system_event(eventnames.AUTH_FAILED, {"transport": "http"})
            return self.error("Unauthorized", 401, cors=False)
        if path.startswith(STREAM_PATHS) and is_stream_path(path):
            return STREAM
        try:
            found = routes.match(method, path)
        except routes.BadEscape:
            return self.error("URI error", 500, cors=False)
        if found is None:
            return self.error("Not found", 404)
        route, params = found
        body = self.body(request, route)
        if isinstance(body, str):
            return self.error(body, 400)
        query = request.query()
        if route.special is not None:
            first = {key: values[0] for key, values in query.items()}
            return self._special(route.special, params, first, body)
        assert route.build is not None
        reply = self.now(route.build(params, query, body), len(request.body))
        if type(reply) is dict:
            return self.reply(route, reply)
        return self._reply_later(route, reply)  # type: ignore[arg-type]

    def reply(self, route: routes.Route, reply: Reply) -> HttpResponse:
        reply.pop("reqId", None)
        return self.json(reply, routes.status_for(route, reply))

    async def _reply_later(self, route: routes.Route, pending: Awaitable[Reply]) -> HttpResponse:
        return self.reply(route, await pending)

    async def _special(self, name: str, params: dict[str, str], query: dict[str, str],
                       body: dict[str, Any]) -> HttpResponse:
        doc, status = await self.answers.special(name, params, query, body)
        return self.json(doc, status)

    async def _debug(self, path: str) -> HttpResponse:
        return self.json(await (self.answers.gc() if path == "/gc" else self.answers.heapstats()))

    def prometheus(self, authorization: str | None) -> Answer:
        if self.metrics_auth:
            if not self.tokens:
                return self.error("Metrics authentication is enabled but no tokens are configured", 503,
                                  cors=False)
            if not self.authorized(authorization):
                return self.error("Unauthorized", 401, cors=False)
        return self._prometheus()

    async def _prometheus(self) -> HttpResponse:
        return self.text(await self.answers.prometheus(), content_type=PROMETHEUS_TYPE)

    def body(self, request: HttpRequest, route: routes.Route) -> dict[str, Any] | str:
        """The JSON body as the route reads it, or the error text that refuses it."""
        if route.body == routes.IGNORED or request.method in ("GET", "DELETE"):
            return {}
        text = request.body.decode("utf-8", errors="replace")
        if not text.strip():
            return errors.INVALID_JSON_BODY if route.body == routes.REQUIRED else {}
        try:
            doc = loads(text)
        except TooDeep:
            # JSON.parse follows any depth; what no command could keep is refused before it is read.
            return {} if route.body == routes.LENIENT else errors.nested_too_deeply("body")
        except ValueError:
            return {} if route.body == routes.LENIENT else errors.INVALID_JSON_BODY
        # A body that is JSON but not an object has no fields to read: refused like unreadable JSON.
        return doc if isinstance(doc, dict) else errors.INVALID_JSON_BODY

    def health(self, path: str) -> Answer:
        if path in ("/healthz", "/live"):
            return self.text("OK")
        if path == "/ready":
            return self._ready()
        # Probes come often: answered at once unless the storage status has to wait.
        storage = self.answers.storage_status()
        if type(storage) is dict:
            return self.health_answer(storage)
        return self._health_later(storage)  # type: ignore[arg-type]

    def health_answer(self, storage: Reply) -> HttpResponse:
        body, status = self.answers.health_body(storage)
        return HttpResponse(status, body, JSON_TYPE, self.cors)

    async def _health_later(self, pending: Awaitable[Reply]) -> HttpResponse:
        return self.health_answer(await pending)

    async def _ready(self) -> HttpResponse:
        return self.json(*await self.answers.ready())

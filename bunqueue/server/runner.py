"""Running a command for any transport: rate limit, auth gate, lookup, errors, ``reqId``, durable replies.

A listener (TCP today, HTTP or WebSocket later) only turns bytes into requests and replies into bytes. It
hands each request to ``CommandRunner`` and writes what comes back; a reply that is not ready at once (a
long-poll, or a change that must reach the disk first) arrives later through ``Client.deliver``.
"""
from __future__ import annotations

import asyncio
import hmac
import logging
from collections.abc import Awaitable
from typing import Any, Protocol

from bunqueue import errors
from bunqueue.broker.components import eventnames
from bunqueue.broker.engine import Engine
from bunqueue.broker.session import Session
from bunqueue.commands import HANDLERS, TIMED, Handler
from bunqueue.errors import BadFrame, CommandError
from bunqueue.monitoring.counters import Histogram
from bunqueue.monitoring.timing import run_timed
from bunqueue.server.codec import decode_command
from bunqueue.server.ratelimit import RequestRateLimiter
from bunqueue.storage import Store

__all__ = ["HANDLERS", "Client", "CommandRunner", "Reply", "check_token", "failed"]

log = logging.getLogger("bunqueue.runner")

Reply = dict[str, Any]
# The reqId types that go back out exactly as they came in; anything else is refused before the command
# runs, so a reply can never fail to be written because of the id it echoes.
ECHOABLE_REQ_IDS = frozenset({str, int, float, bool, bytes})


class Client(Protocol):
    """One client connection, whatever its transport, as the runner sees it."""

    session: Session
    limiter: RequestRateLimiter | None
    # Commands of this client that wait (long-polls): cancelled when it goes.
    tasks: set[asyncio.Task[None]]
    closed: bool

    def deliver(self, replies: list[Reply]) -> None:
        """Replies that were not ready when their command returned."""

    def task_done(self, task: asyncio.Task[None]) -> None:
        """A waiting command of this client finished (its reply has been delivered)."""


class CommandRunner:
    """Runs decoded requests against the broker; shared by every connection of every listener."""

    def __init__(self, broker: Engine, store: Store, tokens: frozenset[str]) -> None:
        self.broker = broker
        self.store = store
        self.tokens = tokens
        self.routes: dict[str, tuple[Handler, Histogram | None]] = {}
        self.handlers = HANDLERS
        # A memory-only store never makes a reply wait for a commit: no ticket to ask for.
        self.persistent = store.persistent
        # Replies held until the commit that makes their change durable: ticket -> client -> replies.
        self.held: dict[asyncio.Future[str | None], dict[Client, list[Reply]]] = {}

    @property
    def handlers(self) -> dict[str, Handler]:
        return {name: handler for name, (handler, _) in self.routes.items()}

    @handlers.setter
    def handlers(self, handlers: dict[str, Handler]) -> None:
        # Each command's handler and, for a timed command, its latency histogram (see monitoring.timing):
        # one lookup per request.
        latency = self.broker.latency_histograms()
        self.routes = {
            name: (handler, latency[TIMED[name]] if name in TIMED else None) for name, handler in handlers.items()
        }

    def new_session(self) -> Session:
        """A client connected (released with ``release``): Metrics counts it as an active connection."""
        self.broker.connection_opened()
        return Session(authenticated=not self.tokens)

    def run_frame(self, body: bytes, client: Client, allowed: bool) -> Reply | None:
        """The reply to one MessagePack frame, or None when it will come through ``client.deliver``.

        ``allowed``: what the client's rate limit said of this frame. The listener asks it before decoding,
        once for the frames of a read, so undecodable frames cost their sender's budget like any other.
        """
        client.session.frame_size = len(body)
        try:
            request = decode_command(body)
        except BadFrame as exc:
            return {"ok": False, "error": exc.message}
        except Exception:
            # Decoded, but too deep or too odd for the codec's own passes (a RecursionError, say).
            log.debug("a frame could not be decoded", exc_info=True)
            return {"ok": False, "error": errors.INVALID_COMMAND_FORMAT}
        return self.run(request, client, allowed)

    def run(self, request: dict[str, Any], client: Client, allowed: bool = True) -> Reply | None:
        """The reply to one decoded request, or None when it will come through ``client.deliver``."""
        req_id = request.get("reqId")
        if req_id is not None and type(req_id) not in ECHOABLE_REQ_IDS:
            return {"ok": False, "error": errors.INVALID_REQ_ID}
        session = client.session
        name = request.get("cmd")
        # The usual case first: an allowed, authenticated request for a known command.
        route = self.routes.get(name) if allowed and session.authenticated and type(name) is str else None
        # A reply dict, or an awaitable of one when the command waits.
        reply: Any
        try:
            if route is None:
                reply = self.refuse(request, session, allowed)
            else:
                handler, histogram = route
                if histogram is not None:
                    histogram.countdown -= 1
                    if not histogram.countdown:
                        reply = run_timed(handler, histogram, self.broker, request, session)
                    else:
                        reply = handler(self.broker, request, session)
                else:
                    reply = handler(self.broker, request, session)
        except CommandError as exc:
            reply = {"ok": False, "error": exc.message}
        except Exception:
            log.exception("command failed")
            reply = {"ok": False, "error": errors.INTERNAL_ERROR}
        if type(reply) is not dict:
            self.wait(reply, req_id, client)
            return None
        if req_id is not None:
            reply["reqId"] = req_id
        if not self.persistent:
            return reply
        ticket = self.store.take_ticket()
        if ticket is None:
            return reply
        self.hold(ticket, reply, client)
        return None

    def refuse(self, request: dict[str, Any], session: Session, allowed: bool) -> Reply:
        """The reply to a request that names no command the session may run now (Auth included)."""
        if not allowed:
            if self.broker.hears_system_events():
                self.broker.system_event(eventnames.RATELIMIT_HIT, {"clientId": session.client_id()})
            return {"ok": False, "error": errors.RATE_LIMIT_EXCEEDED}
        name = request.get("cmd")
        if name is None or name == "":
            return {"ok": False, "error": errors.INVALID_COMMAND}
        if name == "Auth":
            return self.authenticate(request.get("token"), session)
        if not session.authenticated:
            return {"ok": False, "error": errors.NOT_AUTHENTICATED}
        return {"ok": False, "error": errors.unknown_command(name)}

    def authenticate(self, token: Any, session: Session) -> Reply:
        if self.tokens and check_token(token, self.tokens):
            session.authenticated = True
            return {"ok": True}
        if self.broker.hears_system_events():
            self.broker.system_event(eventnames.AUTH_FAILED, {"clientId": session.client_id()})
        return {"ok": False, "error": errors.INVALID_TOKEN}

    def release(self, client: Client) -> None:
        """The client is gone: stop its waiting commands and return the jobs it held."""
        for task in client.tasks:
            task.cancel()
        self.broker.release_session(client.session)
        self.broker.connection_closed()

    # -- replies that come later -------------------------------------------------------------------

    def wait(self, pending: Awaitable[Reply], req_id: Any, client: Client) -> None:
        task = asyncio.get_running_loop().create_task(self.reply_later(pending, req_id, client))
        client.tasks.add(task)
        task.add_done_callback(client.task_done)

    async def reply_later(self, pending: Awaitable[Reply], req_id: Any, client: Client) -> None:
        try:
            reply = await pending
        except CommandError as exc:
            reply = {"ok": False, "error": exc.message}
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("waiting command failed")
            reply = {"ok": False, "error": errors.INTERNAL_ERROR}
        if req_id is not None:
            reply["reqId"] = req_id
        ticket = self.store.take_ticket() if self.persistent else None
        if ticket is not None:
            self.hold(ticket, reply, client)
        elif not client.closed:
            client.deliver([reply])

    def hold(self, ticket: asyncio.Future[str | None], reply: Reply, client: Client) -> None:
        waiting = self.held.get(ticket)
        if waiting is None:
            self.held[ticket] = {client: [reply]}
            ticket.add_done_callback(self.committed)
            return
        replies = waiting.get(client)
        if replies is None:
            waiting[client] = [reply]
        else:
            replies.append(reply)

    def committed(self, ticket: asyncio.Future[str | None]) -> None:
        waiting = self.held.pop(ticket, {})
        failure = ticket.result()
        for client, replies in waiting.items():
            if client.closed:
                continue
            if failure is not None:
                # The change is kept and retried, but it is not durable yet: say so rather than acknowledge.
                replies = [failed(reply, failure) for reply in replies]
            client.deliver(replies)


def failed(reply: Reply, error: str) -> Reply:
    """An error reply in place of ``reply``, keeping its reqId."""
    out: Reply = {"ok": False, "error": error}
    if "reqId" in reply:
        out["reqId"] = reply["reqId"]
    return out


def check_token(token: Any, tokens: frozenset[str]) -> bool:
    if type(token) is not str:
        return False
    given = token.encode()
    # Constant-time compare against every token, so timing tells nothing about which one nearly matched.
    found = False
    for candidate in tokens:
        if hmac.compare_digest(given, candidate.encode()):
            found = True
    return found

"""The stream side of the HTTP API: Server-Sent Events (`/events...`) and WebSocket (`/ws...`) on aiohttp's
low-level server. A connection comes here from ``connection`` once its request passed the rate limit and
the token check, with the request's bytes; this module loads aiohttp, so it is imported with the first
stream request.
"""
from __future__ import annotations

from aiohttp import web

from bunqueue.server.http.streams import EventFeed

__all__ = ["EventFeed", "build_stream_server"]


def build_stream_server(feed: EventFeed) -> web.Server:
    """aiohttp's low-level server answering one stream request per connection. A client that goes away
    cancels its handler, so an event stream leaves at once."""

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        path = request.rel_url.raw_path
        queue = path.split("/queues/", 1)[1] if "/queues/" in path else None
        if path == "/ws" or path.startswith("/ws/"):
            response = await feed.websocket(request, queue, feed.handle_text)
        else:
            response = await feed.sse(request, queue)
        # The connection was handed over for this stream only: whatever the client sends after it is not
        # a stream request.
        response.force_close()
        return response

    return web.Server(handle, handler_cancellation=True, access_log=None)

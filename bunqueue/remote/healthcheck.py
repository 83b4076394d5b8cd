"""``bunqueue healthcheck [url]``: the container probe. One HTTP GET of the server's ``/health``, no shell and
no broker: exit 0 when it answers 2xx with ``{"status": "healthy"}``, else 1.

As the original's: the default URL is ``http://127.0.0.1:$HTTP_PORT/health`` (6790), the request gives up
after 5 s, a redirect is a failure, and a failure prints one fixed line, never the response (a health log
must not carry credentials or payloads).
"""
from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

TIMEOUT_S = 5.0
HEALTHY = "healthy"
FAILED = "Health check failed"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        raise urllib.error.URLError("redirected")


def default_url(env: Mapping[str, str]) -> str:
    return f"http://127.0.0.1:{env.get('HTTP_PORT') or '6790'}/health"


def probe(url: str) -> bool:
    """Whether ``url`` answers as a healthy server does."""
    if urlsplit(url).scheme not in ("http", "https"):
        return False
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=TIMEOUT_S) as response:
            body = json.loads(response.read())
    except (OSError, ValueError):
        # HTTPError (4xx, 5xx) is an OSError too.
        return False
    return isinstance(body, dict) and body.get("status") == HEALTHY


def run(args: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    env = os.environ if env is None else env
    if len(args) <= 1 and probe(args[0] if args else default_url(env)):
        print(HEALTHY)
        return 0
    print(FAILED, file=sys.stderr)
    return 1

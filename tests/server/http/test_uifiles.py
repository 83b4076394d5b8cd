"""The dashboard's files on the HTTP port: types, caching, deep links, no way out of the folder, open with auth
on; and `GET /queues/:q/limits`, the one route the dashboard adds to the original's."""
from __future__ import annotations

import json
from collections.abc import Iterator
from http.client import HTTPConnection
from importlib import resources

import pytest

from bunqueue._testbase.server import ServerProcess

UI = resources.files("bunqueue").joinpath("ui")


@pytest.fixture(scope="module")
def ui_server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000"}).start()
    yield proc
    proc.stop()


def get(server: ServerProcess, path: str, method: str = "GET",
        headers: dict[str, str] | None = None, body: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    conn = HTTPConnection("127.0.0.1", server.http_port, timeout=10)
    try:
        conn.request(method, path, body=body, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


def test_the_page_and_its_files_with_their_types(ui_server: ServerProcess) -> None:
    page = UI.joinpath("index.html").read_bytes()
    status, headers, body = get(ui_server, "/ui/")
    assert (status, headers["content-type"], body) == (200, "text/html; charset=utf-8", page)
    assert headers["cache-control"] == "no-cache" and headers["etag"].startswith('"')
    assert headers["x-content-type-options"] == "nosniff"
    assert "script-src 'self'" in headers["content-security-policy"]
    for name, content_type in (("app.js", "text/javascript; charset=utf-8"), ("style.css", "text/css; charset=utf-8"),
                               ("icon.svg", "image/svg+xml")):
        status, headers, body = get(ui_server, f"/ui/static/{name}")
        assert (status, headers["content-type"], body) == (200, content_type, UI.joinpath(name).read_bytes())
    status, headers, body = get(ui_server, "/ui/static/config.json")
    assert (status, headers["content-type"], json.loads(body)) == (200, "application/json", {"auth": False})


def test_deep_links_are_the_page_and_bare_ui_redirects(ui_server: ServerProcess) -> None:
    page = UI.joinpath("index.html").read_bytes()
    for path in ("/ui/jobs/0192-abc", "/ui/queues/emails", "/ui/queues/a%2Fb?state=failed", "/ui/anything/else"):
        status, headers, body = get(ui_server, path)
        assert (status, headers["content-type"], body) == (200, "text/html; charset=utf-8", page), path
    status, headers, body = get(ui_server, "/ui")
    assert (status, headers["location"], body) == (308, "/ui/", b"")
    # Not under /ui: the route table's 404.
    status, _, body = get(ui_server, "/uix")
    assert (status, json.loads(body)) == (404, {"ok": False, "error": "Not found"})


def test_unchanged_files_are_304_and_head_has_no_body(ui_server: ServerProcess) -> None:
    _, headers, _ = get(ui_server, "/ui/static/app.js")
    etag = headers["etag"]
    status, headers, body = get(ui_server, "/ui/static/app.js", headers={"If-None-Match": etag})
    assert (status, headers["etag"], body) == (304, etag, b"")
    assert "content-length" not in headers
    status, _, _ = get(ui_server, "/ui/static/app.js", headers={"If-None-Match": '"other"'})
    assert status == 200
    status, headers, body = get(ui_server, "/ui/static/app.js", method="HEAD")
    assert (status, body) == (200, b"")
    assert int(headers["content-length"]) == len(UI.joinpath("app.js").read_bytes())


def test_no_path_leaves_the_folder(ui_server: ServerProcess) -> None:
    for path in ("/ui/static/../../pyproject.toml", "/ui/static/..%2f..%2f__init__.py", "/ui/static/%2e%2e/cli.py",
                 "/ui/static/", "/ui/static/missing.js", "/ui/static/app.js/", "/ui/static//etc/passwd",
                 "/ui/static/../server/http/uifiles.py"):
        status, headers, body = get(ui_server, path)
        assert (status, body) == (404, b"Not Found"), path
    # Only GET and HEAD read files; any other method is the route table's 404.
    status, _, body = get(ui_server, "/ui/", method="POST", body=b"{}")
    assert (status, json.loads(body)) == (404, {"ok": False, "error": "Not found"})


def test_with_auth_the_files_are_open_and_the_api_is_not() -> None:
    proc = ServerProcess(env={"AUTH_TOKENS": "s3cret"}).start()
    try:
        status, _, body = get(proc, "/ui/queues/x")
        assert (status, body) == (200, UI.joinpath("index.html").read_bytes())
        status, _, body = get(proc, "/ui/static/config.json")
        assert (status, json.loads(body)) == (200, {"auth": True})
        status, _, body = get(proc, "/queues/x/limits")
        assert (status, json.loads(body)) == (401, {"ok": False, "error": "Unauthorized"})
        status, _, body = get(proc, "/queues/x/limits", headers={"Authorization": "Bearer s3cret"})
        assert status == 200 and json.loads(body)["ok"] is True
    finally:
        proc.stop()


def test_queue_limits_answer_what_was_set(ui_server: ServerProcess) -> None:
    def limits() -> dict[str, object]:
        status, _, body = get(ui_server, "/queues/ui-limits/limits")
        assert status == 200
        reply = json.loads(body)
        assert reply["ok"] is True
        return dict(reply["data"]["limits"])

    assert limits() == {"rateLimit": None, "rateLimitTtl": -2, "concurrencyLimit": None, "maxed": False}
    assert get(ui_server, "/queues/ui-limits/rate-limit", "PUT", body=b'{"limit": 5, "duration": 2000}')[0] == 200
    assert get(ui_server, "/queues/ui-limits/concurrency", "PUT", body=b'{"concurrency": 2}')[0] == 200
    got = limits()
    assert (got["rateLimit"], got["concurrencyLimit"], got["maxed"]) == ({"max": 5, "duration": 2000}, 2, False)
    status, _, body = get(ui_server, "/queues/%zz/limits")
    assert (status, json.loads(body)) == (500, {"ok": False, "error": "URI error"})

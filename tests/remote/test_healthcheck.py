"""`bunqueue healthcheck [url]`: exit 0 against a running server, 1 when nothing listens, answers 503, answers
something that is not a healthy server, or redirects; the default URL follows HTTP_PORT."""
from __future__ import annotations

import http.server
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from bunqueue._testbase.server import ServerProcess, free_port

BUNQUEUE = Path(sys.executable).parent / "bunqueue"


def healthcheck(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BUNQUEUE), "healthcheck", *args], capture_output=True, text=True, timeout=30,
                          check=False, env={"PATH": "/usr/bin:/bin", **(env or {})})


class Canned(http.server.BaseHTTPRequestHandler):
    """Answers every GET with the status and body of its path: /503, /200-degraded, /302."""

    def do_GET(self) -> None:  # noqa: N802 - the handler's name is the stdlib's
        replies = {
            "/503": (503, b'{"ok": false, "status": "degraded"}'),
            "/200-degraded": (200, b'{"ok": true, "status": "degraded"}'),
            "/200-text": (200, b"healthy"),
            "/200-healthy": (200, b'{"status": "healthy"}'),
            "/302": (302, b""),
        }
        status, body = replies.get(self.path, (404, b""))
        self.send_response(status)
        if status == 302:
            self.send_header("Location", "/200-healthy")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def canned() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Canned)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_a_running_server_is_healthy(server: ServerProcess) -> None:
    proc = healthcheck(f"http://127.0.0.1:{server.http_port}/health")
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "healthy\n", "")


def test_the_default_url_is_loopback_on_http_port(server: ServerProcess) -> None:
    proc = healthcheck(env={"HTTP_PORT": str(server.http_port)})
    assert (proc.returncode, proc.stdout) == (0, "healthy\n")


def test_nothing_listening_fails() -> None:
    proc = healthcheck(f"http://127.0.0.1:{free_port()}/health")
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", "Health check failed\n")
    proc = healthcheck(env={"HTTP_PORT": str(free_port())})
    assert proc.returncode == 1


@pytest.mark.parametrize("path", ["/503", "/200-degraded", "/200-text", "/302", "/404"])
def test_anything_but_a_healthy_answer_fails(canned: str, path: str) -> None:
    proc = healthcheck(canned + path)
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", "Health check failed\n")


def test_the_canned_healthy_answer_passes(canned: str) -> None:
    # The canned server itself is not what fails the cases above.
    assert healthcheck(canned + "/200-healthy").returncode == 0


@pytest.mark.parametrize("args", [["ftp://127.0.0.1/health"], ["http://127.0.0.1:1/a", "http://127.0.0.1:1/b"]])
def test_a_bad_command_line_fails(args: list[str]) -> None:
    proc = healthcheck(*args)
    assert (proc.returncode, proc.stderr) == (1, "Health check failed\n")

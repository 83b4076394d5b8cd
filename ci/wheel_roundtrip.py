"""Check an installed bunqueue: run by the Python of the environment the wheel went into, from outside the
source tree, it starts that environment's ``bunqueue start`` and sends PUSH, PULL (with a lock), ACK and
GetState over a real socket, reads the dashboard's page over HTTP, then stops the server with SIGTERM. Any
failure exits non-zero."""
from __future__ import annotations

import http.client
import importlib.metadata
import os
import signal
import socket
import struct
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

import msgpack

import bunqueue._core

SCRIPTS = Path(sysconfig.get_path("scripts"))
SITE = Path(sysconfig.get_path("platlib")).resolve()


def check(condition: bool, message: str) -> None:
    if not condition:
        sys.exit(f"wheel check failed: {message}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request(sock: socket.socket, cmd: dict[str, Any]) -> dict[str, Any]:
    payload = msgpack.packb(cmd)
    sock.sendall(struct.pack(">I", len(payload)) + payload)
    header = recv_exactly(sock, 4)
    reply: dict[str, Any] = msgpack.unpackb(recv_exactly(sock, struct.unpack(">I", header)[0]))
    check(reply.get("reqId") == cmd["reqId"], f"reply {reply} does not answer {cmd}")
    return reply


def recv_exactly(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        check(bool(chunk), "the server closed the connection")
        data += chunk
    return data


def check_installed_package() -> None:
    core = Path(bunqueue._core.__file__).resolve().parent
    check(core.is_relative_to(SITE), f"bunqueue imported from {core}, not from {SITE}")
    modules = sorted(p.name for p in core.iterdir() if p.suffix == ".so")
    check(len(modules) > 0, f"no compiled modules in {core}")
    sources = sorted(p.name for p in core.iterdir() if p.suffix in {".pyx", ".pxd", ".c"})
    check(not sources, f"build sources shipped in the wheel: {sources}")
    stubs = sorted(p.name for p in core.iterdir() if p.suffix == ".pyi")
    check(len(stubs) == len(modules), f"stubs {stubs} do not match modules {modules}")
    check((core.parent / "py.typed").exists(), "py.typed is missing")
    ui = sorted(p.name for p in (core.parent / "ui").iterdir())
    for name in ("index.html", "app.js", "api.js", "overview.js", "queue.js", "job.js", "style.css"):
        check(name in ui, f"the dashboard's {name} is missing from {ui}")
    version = importlib.metadata.version("bunqueue")
    shown = subprocess.run([SCRIPTS / "bunqueue", "--version"], capture_output=True, text=True, check=True)
    check(shown.stdout.strip() == f"bunqueue {version}", f"--version printed {shown.stdout!r}")
    print(f"installed: bunqueue {version}, {len(modules)} compiled modules in {core}")


def round_trip(port: int) -> None:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        pushed = request(sock, {"cmd": "PUSH", "reqId": "1", "queue": "wheel", "data": {"n": 1}})
        check(pushed["ok"] is True and isinstance(pushed.get("id"), str), f"PUSH answered {pushed}")
        pulled = request(sock, {"cmd": "PULL", "reqId": "2", "queue": "wheel", "owner": "w", "timeout": 1000})
        job = pulled.get("job") or {}
        check(job.get("id") == pushed["id"] and job.get("data") == {"n": 1}, f"PULL answered {pulled}")
        acked = request(sock, {"cmd": "ACK", "reqId": "3", "id": job["id"], "token": pulled["token"],
                               "result": {"done": True}})
        check(acked["ok"] is True, f"ACK answered {acked}")
        state = request(sock, {"cmd": "GetState", "reqId": "4", "id": job["id"]})
        check(state.get("state") == "completed", f"GetState answered {state}")
        result = request(sock, {"cmd": "GetResult", "reqId": "5", "id": job["id"]})
        check(result.get("result") == {"done": True}, f"GetResult answered {result}")
    print(f"round trip: job {job['id']} pushed, pulled with a lock, acked, completed with its result")


def dashboard(http_port: int) -> None:
    page = (Path(bunqueue._core.__file__).resolve().parent.parent / "ui" / "index.html").read_bytes()
    for path, content_type, body in (("/ui/jobs/x", "text/html; charset=utf-8", page),
                                     ("/ui/static/app.js", "text/javascript; charset=utf-8", None)):
        conn = http.client.HTTPConnection("127.0.0.1", http_port, timeout=10)
        conn.request("GET", path)
        resp = conn.getresponse()
        got = resp.read()
        conn.close()
        check(resp.status == 200 and resp.getheader("Content-Type") == content_type and body in (None, got),
              f"GET {path} answered {resp.status} {resp.getheader('Content-Type')}")
    print("dashboard: /ui/ served from the installed package")


def main() -> None:
    check_installed_package()
    port = free_port()
    http_port = free_port()
    cmd = [str(SCRIPTS / "bunqueue"), "start", "--host", "127.0.0.1", "--tcp-port", str(port),
           "--http-port", str(http_port)]
    server = subprocess.Popen(cmd, env=dict(os.environ), stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 20
        while True:
            check(server.poll() is None, f"server exited with {server.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                check(time.monotonic() < deadline, "server did not listen within 20 s")
                time.sleep(0.05)
        round_trip(port)
        dashboard(http_port)
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
        _, err = server.communicate(timeout=30)
    check(server.returncode == 0, f"server exited with {server.returncode}: {err}")
    print("server stopped cleanly on SIGTERM")


if __name__ == "__main__":
    main()

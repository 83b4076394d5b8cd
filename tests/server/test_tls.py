"""TLS on both listeners with a certificate made for the test; the CLI's --tls options; bad files."""
from __future__ import annotations

import asyncio
import shutil
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from bunqueue._testbase.server import ServerProcess
from bunqueue.client import connect

OPENSSL = shutil.which("openssl")
pytestmark = pytest.mark.skipif(OPENSSL is None, reason="the openssl command makes the test certificate")
BUNQUEUE = Path(sys.executable).parent / "bunqueue"


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([str(OPENSSL), "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


@pytest.fixture(scope="module")
def tls_server(cert: tuple[Path, Path]) -> Iterator[ServerProcess]:
    proc = ServerProcess(args=["--tls-cert", str(cert[0]), "--tls-key", str(cert[1])]).start()
    yield proc
    proc.stop()


def client_context(cert: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cert))


def test_tcp_speaks_tls_and_refuses_plain_frames(tls_server: ServerProcess, cert: tuple[Path, Path]) -> None:
    async def check() -> None:
        conn = await connect(*tls_server.addr, ssl=client_context(cert[0]))
        try:
            pushed = await conn.request({"cmd": "PUSH", "queue": "tls-q", "data": {"secret": 1}})
            assert pushed["ok"] is True
            assert (await conn.request({"cmd": "GetJob", "id": pushed["id"]}))["job"]["data"] == {"secret": 1}
        finally:
            await conn.close()
        plain = await connect(*tls_server.addr, timeout=5)
        with pytest.raises((ConnectionError, TimeoutError)):
            async with asyncio.timeout(3):
                await plain.request({"cmd": "Ping"})
        plain.abort()

    asyncio.run(check())


def test_https_serves_the_same_api(tls_server: ServerProcess, cert: tuple[Path, Path]) -> None:
    async def check() -> None:
        async with aiohttp.ClientSession() as http:
            url = f"https://127.0.0.1:{tls_server.http_port}/health"
            async with http.get(url, ssl=client_context(cert[0])) as resp:
                assert resp.status == 200 and (await resp.json())["status"] == "healthy"
            # Streams are handed to their own handler on the same TLS connection.
            base = f"https://127.0.0.1:{tls_server.http_port}"
            async with http.get(f"{base}/events", ssl=client_context(cert[0])) as resp:
                assert resp.headers["Content-Type"] == "text/event-stream"
                assert await resp.content.readline() == b"retry: 3000\n"
            async with http.ws_connect(f"{base}/ws", ssl=client_context(cert[0])) as ws:
                await ws.send_str('{"cmd": "Ping", "reqId": "tls"}')
                reply = await asyncio.wait_for(ws.receive_json(), 5)
                assert reply["ok"] is True and reply["reqId"] == "tls"

    asyncio.run(check())


def test_cli_connects_with_tls_options(tls_server: ServerProcess, cert: tuple[Path, Path]) -> None:
    target = ["-H", "127.0.0.1", "-p", str(tls_server.port)]
    run = [str(BUNQUEUE), "ping", *target]
    trusted = subprocess.run([*run, "--tls-ca", str(cert[0])], capture_output=True, text=True, timeout=30)
    assert trusted.returncode == 0, trusted.stderr
    unverified = subprocess.run([*run, "--tls-no-verify"], capture_output=True, text=True, timeout=30)
    assert unverified.returncode == 0, unverified.stderr
    # Verified against the system's CAs the self-signed certificate is refused, with a message.
    refused = subprocess.run([*run, "--tls"], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 1 and refused.stderr.startswith("error: cannot reach the server at")
    assert "CERTIFICATE_VERIFY_FAILED" in refused.stderr


@pytest.mark.parametrize("args,message", [
    (["--tls-cert", "/nonexistent/cert.pem", "--tls-key", "/nonexistent/key.pem"],
     "cannot start TLS: TLS file not found: /nonexistent/cert.pem"),
    (["--tls-cert", "/nonexistent/cert.pem"], "--tls-key (TLS_KEY_FILE) is not"),
])
def test_bad_tls_files_stop_the_server_at_start(args: list[str], message: str) -> None:
    proc = subprocess.run([sys.executable, "-m", "bunqueue", "start", "--host", "127.0.0.1", "--tcp-port", "0",
                           "--http-port", "0", *args], capture_output=True, text=True, timeout=30)
    assert proc.returncode != 0 and message in proc.stderr, proc.stderr

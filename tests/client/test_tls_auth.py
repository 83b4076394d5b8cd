"""The client against a server with TLS and auth tokens: the SDK's ``tls`` forms (a CA file, no
verification, an SSLContext) and ``token``; a wrong token raises AuthenticationError (the SDK's AuthError)."""
from __future__ import annotations

import asyncio
import ssl
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import bunqueue
from bunqueue._testbase.server import ServerProcess
from bunqueue._testbase.tls import OPENSSL, self_signed_cert
from bunqueue.asyncio import Job, Queue, QueueEvents, Worker
from bunqueue.errors import AuthenticationError, ConnectionClosedError, RemoteCommandError

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(OPENSSL is None, reason="the openssl command makes the test certificate"),
]
TOKEN = "client-tls-token"


@pytest.fixture(scope="module")
def cert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return self_signed_cert(tmp_path_factory.mktemp("client-tls"))[0]


@pytest.fixture(scope="module")
def secured(cert: Path) -> Iterator[ServerProcess]:
    key = cert.parent / "key.pem"
    proc = ServerProcess(env={"AUTH_TOKENS": f"other,{TOKEN}"},
                         args=["--tls-cert", str(cert), "--tls-key", str(key)]).start()
    yield proc
    proc.stop()


def _name() -> str:
    return f"tls-{uuid.uuid4().hex[:8]}"


def _tls_forms(cert: Path) -> list[Any]:
    return [{"ca_file": str(cert)}, {"verify": False}, ssl.create_default_context(cafile=str(cert))]


async def test_asyncio_queue_over_tls_with_each_tls_form(secured: ServerProcess, cert: Path) -> None:
    for tls in _tls_forms(cert):
        async with Queue(_name(), host="127.0.0.1", port=secured.port, token=TOKEN, tls=tls) as queue:
            job = await queue.add("secret", {"n": 1})
            stored = await queue.get_job(job.id)
            assert stored is not None and stored.data == {"n": 1} and stored.name == "secret", tls
            conn = await queue.transport.connection()  # type: ignore[attr-defined]
            assert conn.get_extra_info("ssl_object") is not None


async def test_asyncio_worker_and_events_over_tls(secured: ServerProcess, cert: Path) -> None:
    name = _name()
    addr: dict[str, Any] = {"host": "127.0.0.1", "port": secured.port, "token": TOKEN,
                            "tls": {"ca_file": str(cert)}}
    async with Queue(name, **addr) as queue, QueueEvents(name, **addr) as events:
        await events.wait_until_ready()
        completed: list[dict[str, Any]] = []
        events.on("completed", completed.append)

        async def double(job: Job) -> int:
            return int(job.data["n"]) * 2

        worker = Worker(name, double, concurrency=1, **addr)
        job = await queue.add("double", {"n": 4})
        deadline = asyncio.get_running_loop().time() + 20
        while not completed:
            assert asyncio.get_running_loop().time() < deadline, "no completed event"
            await asyncio.sleep(0.02)
        await worker.close()
        assert completed == [{"jobId": job.id, "returnvalue": 8}]


async def test_asyncio_refusals(secured: ServerProcess, cert: Path) -> None:
    addr: dict[str, Any] = {"host": "127.0.0.1", "port": secured.port, "tls": {"ca_file": str(cert)}}
    async with Queue(_name(), token="wrong", **addr) as queue:
        with pytest.raises(AuthenticationError, match="^Invalid token$"):
            await queue.add("x", {})
    async with Queue(_name(), **addr) as queue:
        with pytest.raises(RemoteCommandError, match="^Not authenticated$"):
            await queue.add("x", {})
    # The system CAs do not vouch for the self-signed certificate.
    async with Queue(_name(), token=TOKEN, host="127.0.0.1", port=secured.port, tls=True) as queue:
        with pytest.raises(ConnectionClosedError, match="CERTIFICATE_VERIFY_FAILED"):
            await queue.add("x", {})
    with pytest.raises(AuthenticationError):
        await QueueEvents(_name(), token="wrong", **addr).wait_until_ready()


def test_sync_queue_worker_and_connection_over_tls(secured: ServerProcess, cert: Path) -> None:
    name = _name()
    for tls in _tls_forms(cert):
        queue = bunqueue.Queue(name, host="127.0.0.1", port=secured.port, token=TOKEN, tls=tls)
        job = queue.add("task", {"n": 2})
        assert queue.get_job(job.id) is not None
        queue.close()
    shared = bunqueue.Connection(host="127.0.0.1", port=secured.port, token=TOKEN, tls={"verify": False})
    assert shared.ping() is True
    queue = bunqueue.Queue(name, connection=shared)
    assert queue.count() == 3
    done = threading.Event()
    results: list[Any] = []
    worker = bunqueue.Worker(name, lambda j: j.data["n"] * 10, host="127.0.0.1", port=secured.port, token=TOKEN,
                             tls={"ca_file": str(cert)}, concurrency=1)
    worker.on("completed", lambda j, r: (results.append(r), len(results) == 3 and done.set()))
    assert done.wait(20)
    assert worker.close(timeout=15)
    assert results == [20, 20, 20]
    queue.close()
    shared.close()


def test_sync_wrong_token_raises_auth_error(secured: ServerProcess, cert: Path) -> None:
    queue = bunqueue.Queue(_name(), host="127.0.0.1", port=secured.port, token="wrong",
                           tls={"ca_file": str(cert)})
    with pytest.raises(bunqueue.AuthError, match="^Invalid token$"):
        queue.add("x", {})
    queue.close()
    conn = bunqueue.Connection(host="127.0.0.1", port=secured.port, token="wrong", tls={"verify": False})
    with pytest.raises(bunqueue.AuthError):
        conn.connect()
    with pytest.raises(bunqueue.AuthError):
        conn.ping()
    conn.close()

"""``bunqueue mcp --http``: the same server over streamable HTTP."""
from __future__ import annotations

import socket
import subprocess
import sys
import time

from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from bunqueue._testbase.server import free_port


def wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError("the MCP HTTP server did not start listening")


async def test_streamable_http_offers_the_tools_under_mcp() -> None:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "bunqueue", "mcp", "--http", "--http-port", str(port)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_listening(port, proc)
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as streams, \
                ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            assert len((await session.list_tools()).tools) == 73
            added = await session.call_tool("bunqueue_add_job", {"queue": "web", "name": "n", "data": {}})
            assert not added.is_error
            counted = await session.call_tool("bunqueue_count_jobs", {"queue": "web"})
            assert counted.content[0].text == '{"queue":"web","count":1}'  # type: ignore[union-attr]
    finally:
        proc.terminate()
        proc.wait(10)

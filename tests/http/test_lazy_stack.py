"""The HTTP stack (aiohttp) is loaded by the first HTTP connection, not at start: requests that arrive while
it loads are answered, and a broker used only over TCP never loads it."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent(
    """
    import asyncio, json, sys
    import msgpack, uvloop
    from bunqueue.config import Settings
    from bunqueue._testbase.server import free_port
    from bunqueue.server.app import BrokerServer

    async def main():
        server = BrokerServer(Settings.load(env={"TCP_PORT": "0", "HTTP_PORT": str(free_port()), "HOST": "127.0.0.1"}))
        await server.start()
        host, port = server.tcp_address
        reader, writer = await asyncio.open_connection(host, port)
        body = msgpack.packb({"cmd": "Ping"})
        writer.write(len(body).to_bytes(4, "big") + body)
        await writer.drain()
        await reader.readexactly(4)
        tcp_only = "aiohttp" in sys.modules
        # Two connections, each sending its whole request before the stack is loaded.
        answers = []
        conns = [await asyncio.open_connection("127.0.0.1", server.http.port) for _ in range(2)]
        for _, w in conns:
            w.write(b"GET /health HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
        for r, _ in conns:
            head, _, body = (await r.read()).partition(b"\\r\\n\\r\\n")
            answers.append((head.split(b"\\r\\n")[0].decode(), json.loads(body)["status"]))
        after = [await asyncio.open_connection("127.0.0.1", server.http.port)]
        after[0][1].write(b"GET /healthz HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n")
        last = (await after[0][0].read()).split(b"\\r\\n")[0].decode()
        writer.close()
        await server.shutdown()
        print(json.dumps({"tcp_only": tcp_only, "answers": answers, "last": last,
                          "loaded": "aiohttp" in sys.modules}))

    uvloop.run(main())
    """
)


def test_the_http_stack_loads_with_the_first_http_connection() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["tcp_only"] is False
    assert report["answers"] == [["HTTP/1.1 200 OK", "healthy"], ["HTTP/1.1 200 OK", "healthy"]]
    assert report["last"] == "HTTP/1.1 200 OK"
    assert report["loaded"] is True

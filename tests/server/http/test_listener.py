"""REST requests are answered without aiohttp; the stream side (SSE, WebSocket) is loaded by the first stream
request, and the streams that arrive while it loads are served once it is ready."""
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

    async def head(reader):
        lines = []
        while (line := await reader.readline()) not in (b"\\r\\n", b""):
            lines.append(line.decode().strip())
        return lines

    async def main():
        server = BrokerServer(Settings.load(env={"TCP_PORT": "0", "HTTP_PORT": str(free_port()), "HOST": "127.0.0.1"}))
        await server.start()
        host, port = server.tcp_address
        reader, writer = await asyncio.open_connection(host, port)
        body = msgpack.packb({"cmd": "Ping"})
        writer.write(len(body).to_bytes(4, "big") + body)
        await writer.drain()
        await reader.readexactly(4)
        http_port = server.http.port
        # REST requests on one keep-alive connection.
        r, w = await asyncio.open_connection("127.0.0.1", http_port)
        w.write(b"GET /health HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
        w.write(b"POST /queues/q/jobs HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 18\\r\\n\\r\\n"
                b'{"data": {"a": 1}}')
        rest = []
        for _ in range(2):
            lines = await head(r)
            length = int(next(l.split(":")[1] for l in lines if l.lower().startswith("content-length")))
            rest.append((lines[0], json.loads(await r.readexactly(length))["ok"]))
        rest_only = "aiohttp" in sys.modules
        # Two streams asked for at once: the first on the same connection, after its REST requests.
        w.write(b"GET /events HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
        r2, w2 = await asyncio.open_connection("127.0.0.1", http_port)
        w2.write(b"GET /events/queues/q HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
        streams = []
        for reader_ in (r, r2):
            lines = await head(reader_)
            streams.append([lines[0], next(l for l in lines if l.lower().startswith("content-type"))])
            # The stream's first message (chunked: a size line, then the data).
            await reader_.readline()
            streams[-1].append((await reader_.readline()).decode().strip())
        for w_ in (w, w2, writer):
            w_.close()
        await server.shutdown()
        print(json.dumps({"tcp_only": "aiohttp" in sys.modules, "rest": rest, "rest_only": rest_only,
                          "streams": streams, "loaded": "aiohttp" in sys.modules}))

    uvloop.run(main())
    """
)


def test_rest_needs_no_aiohttp_and_the_first_stream_loads_it() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["rest"] == [["HTTP/1.1 200 OK", True], ["HTTP/1.1 200 OK", True]]
    assert report["rest_only"] is False, "REST requests were answered without loading aiohttp"
    assert report["streams"] == [["HTTP/1.1 200 OK", "Content-Type: text/event-stream", "retry: 3000"]] * 2
    assert report["loaded"] is True

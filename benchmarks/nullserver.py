"""The ceiling of the TCP workloads: a server that frames and answers, and does nothing else.

    python -m benchmarks.nullserver [--host 127.0.0.1] [--tcp-port 6789]

It reads the same MessagePack frames as a broker and answers the commands the benchmark workloads send
(Hello, PUSH, PUSHB, PULL, PULLB, ACK, ACKB, GetJobCounts, Count, Obliterate) with replies of the broker's
shape and size: a pulled job carries every field ours sends. What it keeps is the least a workload's
verification needs: per queue, the pushed jobs not yet pulled (id, name, data) and a count of those pulled
and not yet acknowledged. No leases, no limits, no persistence, no events. ``benchmarks.compare --ceiling``
runs it beside the brokers, so each row shows how far a broker is from what framing alone costs with the
same client. Any other command is refused.
"""
from __future__ import annotations

import argparse
import asyncio
from collections import deque
from typing import Any

import msgpack

# A pulled job's fields besides id, queue, name and data, as ours sends them (times are fixed: nothing
# here reads them).
JOB_FIELDS: dict[str, Any] = {
    "createdAt": 1.0, "runAt": 1.0, "startedAt": 1.0, "completedAt": None, "attempts": 0, "backoff": 1000,
    "backoffConfig": None, "dependsOn": [], "childrenIds": [], "childrenCompleted": 0, "tags": [], "progress": 0,
    "progressMessage": None, "stacktrace": None, "repeat": None, "durable": False, "lastHeartbeat": 1.0,
    "stallCount": 0, "priority": 0, "lifo": False, "maxAttempts": 3, "removeOnComplete": False,
    "removeOnFail": False, "ttl": None, "timeout": None, "uniqueKey": None, "customId": None, "parentId": None,
    "groupId": None, "stallTimeout": None, "stackTraceLimit": 10, "keepLogs": None, "sizeLimit": None,
    "failParentOnFailure": False, "removeDependencyOnFailure": False, "continueParentOnFailure": False,
    "ignoreDependencyOnFailure": False, "deduplicationTtl": None, "deduplicationExtend": False,
    "deduplicationReplace": False, "debounceId": None, "debounceTtl": None,
    "timeline": [{"state": "waiting", "timestamp": 1.0}, {"state": "active", "timestamp": 1.0}],
}
_packer = msgpack.Packer(use_bin_type=True)
_pack = _packer.pack
# A pulled job is packed by hand: the map's header, the four fields that vary, then the others packed once.
JOB_HEAD = _packer.pack_map_header(4 + len(JOB_FIELDS))
JOB_TAIL = b"".join(_pack(key) + _pack(value) for key, value in JOB_FIELDS.items())
KEY_ID, KEY_QUEUE, KEY_NAME, KEY_DATA = (_pack(key) for key in ("id", "queue", "name", "data"))
EMPTY_COUNTS = {"waiting": 0, "prioritized": 0, "delayed": 0, "active": 0, "completed": 0, "failed": 0,
                "waiting-children": 0, "paused": 0}


class NullQueue:
    __slots__ = ("ready", "active", "completed")

    def __init__(self) -> None:
        self.ready: deque[tuple[str, Any, Any]] = deque()
        self.active = 0
        self.completed = 0


class Packed(bytes):
    """A value packed already: written into a reply as it is (``pack_reply``)."""


def pack_reply(reply: dict[str, Any]) -> bytes:
    """``reply`` packed, its ``Packed`` values (a job, or a list of jobs) spliced in as they are."""
    parts = [_packer.pack_map_header(len(reply))]
    for key, value in reply.items():
        parts.append(_pack(key))
        if type(value) is Packed:
            parts.append(value)
        elif type(value) is list and value and type(value[0]) is Packed:
            parts.append(_packer.pack_array_header(len(value)))
            parts.extend(value)
        else:
            parts.append(_pack(value))
    return b"".join(parts)


class NullBroker:
    """The commands' answers; ids are 36 characters, as a broker's UUIDs are."""

    def __init__(self) -> None:
        self.queues: dict[str, NullQueue] = {}
        self.serial = 0
        # Pulled and not yet acknowledged: job id -> its queue.
        self.running: dict[str, NullQueue] = {}

    def next_id(self) -> str:
        self.serial += 1
        return f"00000000-0000-7000-8000-{self.serial:012x}"

    def queue(self, name: Any) -> NullQueue:
        q = self.queues.get(name)
        if q is None:
            q = self.queues[name] = NullQueue()
        return q

    def push(self, q: NullQueue, job: dict[str, Any]) -> str:
        job_id = self.next_id()
        q.ready.append((job_id, job.get("name", "default"), job.get("data")))
        return job_id

    def pull(self, name: str, q: NullQueue, count: int) -> list[Packed]:
        """Up to ``count`` jobs, each already packed (``Packed``)."""
        jobs: list[Packed] = []
        ready, running = q.ready, self.running
        queue = KEY_QUEUE + _pack(name)
        for _ in range(min(count, len(ready))):
            job_id, job_name, data = ready.popleft()
            running[job_id] = q
            jobs.append(Packed(b"".join((JOB_HEAD, KEY_ID, _pack(job_id), queue, KEY_NAME, _pack(job_name),
                                         KEY_DATA, _pack(data), JOB_TAIL))))
        q.active += len(jobs)
        return jobs

    def ack(self, job_id: Any) -> None:
        q = self.running.pop(job_id, None)
        if q is not None:
            q.active -= 1
            q.completed += 1

    def answer(self, cmd: dict[str, Any]) -> dict[str, Any]:
        name = cmd.get("cmd")
        if name == "PUSHB":
            q = self.queue(cmd.get("queue"))
            return {"ok": True, "ids": [self.push(q, job) for job in cmd.get("jobs", ())]}
        if name == "PUSH":
            return {"ok": True, "id": self.push(self.queue(cmd.get("queue")), cmd)}
        if name == "PULLB" or name == "PULL":
            queue = cmd.get("queue")
            jobs = self.pull(queue, self.queue(queue), cmd.get("count", 1) if name == "PULLB" else 1)
            tokens = [self.next_id() for _ in jobs] if cmd.get("owner") is not None else None
            if name == "PULLB":
                return {"ok": True, "jobs": jobs, "tokens": tokens} if tokens else {"ok": True, "jobs": jobs}
            reply = {"ok": True, "job": jobs[0] if jobs else None}
            if tokens:
                reply["token"] = tokens[0]
            return reply
        if name == "ACKB":
            for job_id in cmd.get("ids", ()):
                self.ack(job_id)
            return {"ok": True}
        if name == "ACK":
            self.ack(cmd.get("id"))
            return {"ok": True}
        return self.control(name, cmd)

    def control(self, name: Any, cmd: dict[str, Any]) -> dict[str, Any]:
        if name == "Hello":
            return {"ok": True, "server": "nullserver", "version": "0", "protocolVersion": 3,
                    "capabilities": ["pipelining"]}
        if name == "Ping":
            return {"ok": True, "pong": True}
        q = self.queues.get(cmd.get("queue"))
        if name == "GetJobCounts":
            counts = dict(EMPTY_COUNTS)
            if q is not None:
                counts.update(waiting=len(q.ready), active=q.active, completed=q.completed)
            return {"ok": True, "counts": counts}
        if name == "Count":
            return {"ok": True, "count": 0 if q is None else len(q.ready)}
        if name == "Obliterate":
            self.queues.pop(cmd.get("queue"), None)
            return {"ok": True}
        return {"ok": False, "error": f"the null server does not answer {name!r}"}


class NullProtocol(asyncio.Protocol):
    def __init__(self, broker: NullBroker) -> None:
        self.broker = broker
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buffer = self.buffer
        buffer += data
        out = []
        at = 0
        while len(buffer) - at >= 4:
            size = int.from_bytes(buffer[at:at + 4], "big")
            if len(buffer) - at - 4 < size:
                break
            cmd = msgpack.unpackb(buffer[at + 4:at + 4 + size], raw=False, strict_map_key=False)
            at += 4 + size
            reply = self.broker.answer(cmd)
            if "reqId" in cmd:
                reply["reqId"] = cmd["reqId"]
            body = pack_reply(reply)
            out.append(len(body).to_bytes(4, "big"))
            out.append(body)
        del buffer[:at]
        if out and self.transport is not None:
            self.transport.write(b"".join(out))


async def serve(host: str, port: int) -> None:
    broker = NullBroker()
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: NullProtocol(broker), host, port)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--tcp-port", type=int, default=6789)
    parser.add_argument("--http-port", type=int, default=0, help="ignored: the null server has no HTTP API")
    args = parser.parse_args()
    import uvloop

    uvloop.run(serve(args.host, args.tcp_port))


if __name__ == "__main__":
    main()

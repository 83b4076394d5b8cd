"""PUSHB 100 over TCP with no stream open, with one WebSocket subscribed to ``job:*`` and with one subscribed
to ``*`` (each reads its events as they come), on a fresh server per case; prints batches per second for each.

    python -m benchmarks.stream_events [--batches 300] [--rounds 3]
"""
from __future__ import annotations

import argparse
import asyncio
import json
import time

import aiohttp

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess


def push_batches(port: int, batches: int) -> float:
    client = RawClient(("127.0.0.1", port))
    jobs = [{"data": {"i": i}} for i in range(100)]
    started = time.perf_counter()
    for _ in range(batches):
        assert client.call({"cmd": "PUSHB", "queue": "bench", "jobs": jobs})["ok"] is True
    elapsed = time.perf_counter() - started
    client.close()
    return batches / elapsed


async def with_subscriber(http_port: int, tcp_port: int, batches: int, events: str) -> float:
    async with aiohttp.ClientSession() as session, session.ws_connect(f"http://127.0.0.1:{http_port}/ws") as ws:
        await ws.send_str(json.dumps({"cmd": "Subscribe", "events": [events]}))
        await ws.receive_str()
        received = 0

        async def drain() -> None:
            nonlocal received
            async for _ in ws:
                received += 1
        reader = asyncio.ensure_future(drain())
        rate = await asyncio.get_running_loop().run_in_executor(None, push_batches, tcp_port, batches)
        reader.cancel()
        return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batches", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    for events in (None, "job:*", "*"):
        label = "no stream" if events is None else f"one {events} subscriber"
        rates = []
        for _ in range(args.rounds):
            server = ServerProcess(env={"RATE_LIMIT_MAX_REQUESTS": "100000000"}).start()
            try:
                if events is None:
                    rates.append(push_batches(server.port, args.batches))
                else:
                    rates.append(asyncio.run(with_subscriber(server.http_port, server.port, args.batches, events)))
            finally:
                server.stop()
        each = ", ".join(f"{rate:.0f}" for rate in rates)
        print(f"{label:>22}: PUSHB 100 best {max(rates):8.1f} batches/s  (rounds: {each})")


if __name__ == "__main__":
    main()

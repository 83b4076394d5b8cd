"""``BlockingEngine``: an engine's coroutines and plain methods called from worker threads run on the loop."""
from __future__ import annotations

import asyncio
import threading

import pytest

from bunqueue.errors import CommandError
from bunqueue.storage.postgres.blocking import BlockingEngine


class Recorder:
    """An engine whose methods say which thread ran them."""

    awaits_jobs = True

    def __init__(self) -> None:
        self.threads: list[str] = []

    def clock(self) -> float:
        return 1.0

    async def find(self, value: int) -> int:
        self.threads.append(threading.current_thread().name)
        await asyncio.sleep(0)
        return value * 2

    async def refuse(self) -> None:
        raise CommandError("Job not found")

    def plain(self, value: int) -> int:
        self.threads.append(threading.current_thread().name)
        return value + 1

    def later(self) -> asyncio.Future[int]:
        future: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        future.set_result(7)
        return future


async def test_calls_from_a_thread_run_on_the_loop_and_return_their_answer() -> None:
    engine = Recorder()
    face = BlockingEngine(engine, asyncio.get_running_loop())

    def handler() -> tuple[int, int, float, bool]:
        return face.find(4), face.plain(4), face.clock(), face.awaits_jobs

    assert await asyncio.to_thread(handler) == (8, 5, 1.0, True)
    assert engine.threads == [threading.current_thread().name] * 2


async def test_a_refusal_reaches_the_handler_as_the_same_error() -> None:
    face = BlockingEngine(Recorder(), asyncio.get_running_loop())
    with pytest.raises(CommandError, match="Job not found"):
        await asyncio.to_thread(face.refuse)


async def test_an_awaitable_a_plain_method_returns_comes_back_unawaited() -> None:
    face = BlockingEngine(Recorder(), asyncio.get_running_loop())
    pending = await asyncio.to_thread(face.later)
    assert await pending == 7

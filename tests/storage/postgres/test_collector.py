"""The collector behind the PostgreSQL hot path: concurrent requests share a flush, a lone one is not held
back, outcomes and failures reach the right callers, and no task is made per request."""
from __future__ import annotations

import asyncio

import pytest

from bunqueue.storage.postgres.collector import Collector, CollectorClosed


class Recorder:
    """A flush that takes a little while, as a round trip does, and keeps the batches it was given."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []

    async def flush(self, requests: list[int]) -> list[int | BaseException]:
        self.batches.append(list(requests))
        await asyncio.sleep(0.01)
        return [ValueError(n) if n < 0 else n * 10 for n in requests]


async def test_concurrent_requests_share_one_flush_and_a_lone_one_flushes_at_once() -> None:
    recorder = Recorder()
    collector: Collector[int, int] = Collector(recorder.flush)
    lone = await asyncio.wait_for(collector.submit(1), 1)
    assert lone == 10 and recorder.batches == [[1]]
    outcomes = await asyncio.gather(*(collector.submit(n) for n in range(2, 52)))
    assert outcomes == [n * 10 for n in range(2, 52)]
    # All fifty arrived before the idle flusher ran: one flush took them all.
    assert recorder.batches[1:] == [list(range(2, 52))]
    await collector.close()


async def test_requests_that_arrive_during_a_flush_make_the_next_batch() -> None:
    recorder = Recorder()
    collector: Collector[int, int] = Collector(recorder.flush)
    first = collector.submit(1)
    await asyncio.sleep(0.005)  # the first flush is under way
    later = [collector.submit(n) for n in (2, 3, 4)]
    assert [await first, *[await f for f in later]] == [10, 20, 30, 40]
    assert recorder.batches == [[1], [2, 3, 4]]
    await collector.close()


async def test_a_refused_request_fails_alone_and_a_failed_flush_fails_its_batch() -> None:
    recorder = Recorder()
    collector: Collector[int, int] = Collector(recorder.flush)
    outcomes = await asyncio.gather(collector.submit(1), collector.submit(-1), return_exceptions=True)
    assert outcomes[0] == 10 and isinstance(outcomes[1], ValueError)

    async def broken(requests: list[int]) -> list[int | BaseException]:
        raise ConnectionError("gone")

    failing: Collector[int, int] = Collector(broken)
    outcomes = await asyncio.gather(failing.submit(1), failing.submit(2), return_exceptions=True)
    assert all(isinstance(o, ConnectionError) for o in outcomes)
    # The flusher survives a failed flush.
    again = failing.submit(3)
    with pytest.raises(ConnectionError):
        await again
    await collector.close()
    await failing.close()


async def test_one_flusher_task_however_many_requests() -> None:
    recorder = Recorder()
    collector: Collector[int, int] = Collector(recorder.flush)
    before = len(asyncio.all_tasks())
    futures = [collector.submit(n) for n in range(100)]
    assert len(asyncio.all_tasks()) == before + 1
    await asyncio.gather(*futures)
    await collector.close()
    with pytest.raises(CollectorClosed):
        collector.submit(1)

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


async def _closed_loop(collector: Collector[int, int], first: int, later: int, rounds: int) -> None:
    """Clients that each send their next request as soon as the last is answered: ``first`` of them start
    at once, ``later`` while the first flush runs (a steady load started unevenly)."""
    async def client(n: int) -> None:
        for _ in range(rounds):
            await collector.submit(n)

    tasks = [asyncio.create_task(client(n)) for n in range(first)]
    await asyncio.sleep(0.003)
    tasks += [asyncio.create_task(client(n)) for n in range(first, first + later)]
    await asyncio.gather(*tasks)
    await collector.close()


async def test_a_steady_load_alternates_large_and_small_flushes_unless_balanced() -> None:
    taking_all = Recorder()
    await _closed_loop(Collector(taking_all.flush), 4, 12, 6)
    assert [len(batch) for batch in taking_all.batches] == [4, 12] * 6
    balanced = Recorder()
    await _closed_loop(Collector(balanced.flush, balanced=True), 4, 12, 6)
    sizes = [len(batch) for batch in balanced.batches]
    # The backlog of 12 after the first flush of 4 is taken 8 at a time, and the flushes stay even.
    assert sizes == [4] + [8] * 11 + [4]
    assert sum(sizes) == 16 * 6


async def test_a_balanced_collector_takes_a_burst_half_at_a_time_at_least() -> None:
    recorder = Recorder()
    collector: Collector[int, int] = Collector(recorder.flush, balanced=True)
    first = collector.submit(0)
    await asyncio.sleep(0.005)
    burst = [collector.submit(n) for n in range(1, 101)]
    assert [await first, *[await f for f in burst]] == [n * 10 for n in range(101)]
    # 100 behind a flush of 1: 51, then the 49 left (no more than the last flush took).
    assert [len(batch) for batch in recorder.batches] == [1, 51, 49]
    await collector.close()

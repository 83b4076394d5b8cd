"""The namespace's figures: one statement's counts per queue and state, shared by readers that ask at once."""
from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from bunqueue._core.jobfactory import JobFactory
from bunqueue.storage.postgres.figures import FigureReader, QueueFigures, read_figures
from bunqueue.storage.postgres.hotpath import HotPath
from tests.storage.postgres.test_hotpath import _open

TTL = 30_000


@pytest.fixture
async def hot(postgres_url: str) -> AsyncIterator[HotPath]:
    path = await _open(postgres_url, "figures")
    await path.pool.execute("DELETE FROM bunqueue_jobs WHERE namespace = $1", path.namespace)
    yield path
    await path.close()


async def test_figures_count_each_queues_jobs_by_state(hot: HotPath) -> None:
    factory = JobFactory()
    now = time.time() * 1000

    def job(queue: str, **opts: object) -> object:
        return factory.build({"data": 1, **opts}, queue, now, True)

    await hot.push_many([job("fa"), job("fa", priority=2), job("fa", delay=60_000), job("fa"), job("fb")])
    (running,), _ = await hot.claim("fa", 1, "w", TTL)
    (done,), (done_token,) = await hot.claim("fa", 1, "w", TTL)
    await hot.ack(done.id, done_token)
    figures = await read_figures(hot.pool, hot.namespace)
    assert figures.queues["fa"] == QueueFigures(waiting=1, prioritized=0, delayed=1, active=1, completed=1)
    assert figures.queues["fb"] == QueueFigures(waiting=1)
    assert figures.jobs == 5 and figures.totals().ready == 2
    assert running.priority == 2


async def test_readers_that_ask_at_once_share_one_reading(hot: HotPath) -> None:
    reader = FigureReader(hot.pool, hot.namespace)
    first, second = await asyncio.gather(reader.read(), reader.read())
    assert first is second
    await hot.push(JobFactory().build({"data": 1}, "fc", time.time() * 1000, True))
    # Long after the last reading: a new one, which counts the push.
    await asyncio.sleep(0.2)
    third = await reader.read()
    assert third is not first and third.queues["fc"].waiting == 1
    assert reader.totals == third.totals()

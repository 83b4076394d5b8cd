"""ReadyQueue against the heapq-plus-dict baseline."""
from __future__ import annotations

import random

import pytest
from baselines import HeapqReadyQueue

from bunqueue._core.readyqueue import ReadyQueue

QUEUES = {"compiled": ReadyQueue, "baseline": HeapqReadyQueue}
IMPLS = pytest.mark.parametrize("impl", ["compiled", "baseline"])


def workload(n: int, seed: int = 3) -> list[tuple]:
    rng = random.Random(seed)
    return [
        (f"job-{i}", float(rng.randrange(10)), rng.random() < 0.1, rng.random() * 1e6, i) for i in range(n)
    ]


JOBS_100K = workload(100_000)
JOBS_1M = workload(1_000_000)


def push_all_then_pop_all(queue_type, jobs):
    queue = queue_type()
    push = queue.push
    for job_id, priority, lifo, run_at, seq in jobs:
        push(job_id, priority, lifo, run_at, seq)
    pop = queue.pop
    for _ in range(len(jobs)):
        pop()
    return len(queue)


@IMPLS
@pytest.mark.benchmark(group="readyqueue: push 100k, pop 100k")
def test_push_pop_100k(benchmark, impl):
    assert benchmark.pedantic(push_all_then_pop_all, (QUEUES[impl], JOBS_100K), rounds=5) == 0


@IMPLS
@pytest.mark.benchmark(group="readyqueue: push 1M, pop 1M")
def test_push_pop_1m(benchmark, impl):
    assert benchmark.pedantic(push_all_then_pop_all, (QUEUES[impl], JOBS_1M), rounds=1) == 0


@IMPLS
@pytest.mark.benchmark(group="readyqueue: 100k queued, update 50k + remove 25k + pop_many rest")
def test_churn_by_id(benchmark, impl):
    rng = random.Random(5)
    updates = [(f"job-{rng.randrange(100_000)}", float(rng.randrange(10))) for _ in range(50_000)]
    removals = [f"job-{rng.randrange(100_000)}" for _ in range(25_000)]

    def setup():
        queue = QUEUES[impl]()
        for job in JOBS_100K:
            queue.push(*job)
        return (queue,), {}

    def run(queue):
        for job_id, priority in updates:
            queue.update(job_id, priority, False, 0.0)
        for job_id in removals:
            queue.remove(job_id)
        return queue.pop_many(100_000)

    assert benchmark.pedantic(run, setup=setup, rounds=5)

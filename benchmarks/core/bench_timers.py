"""TimerHeap against the heapq-plus-dict baseline."""
from __future__ import annotations

import random

import pytest
from baselines import HeapqTimerHeap

from bunqueue._core.timers import TimerHeap

HEAPS = {"compiled": TimerHeap, "baseline": HeapqTimerHeap}
IMPLS = pytest.mark.parametrize("impl", ["compiled", "baseline"])
_rng = random.Random(11)
SCHEDULE = [(f"job-{i}", _rng.random() * 1e6) for i in range(100_000)]


@IMPLS
@pytest.mark.benchmark(group="timers: push 100k, pop_due in 100 steps")
def test_push_then_pop_due(benchmark, impl):
    def run():
        heap = HEAPS[impl]()
        push = heap.push
        for key, when in SCHEDULE:
            push(key, when)
        popped = 0
        for step in range(1, 101):
            popped += len(heap.pop_due(step * 1e4))
        return popped

    assert benchmark.pedantic(run, rounds=5) == len(SCHEDULE)


@IMPLS
@pytest.mark.benchmark(group="timers: 100k pending, reschedule 50k and cancel 25k")
def test_reschedule_and_cancel(benchmark, impl):
    moves = [(key, when * 0.5) for key, when in SCHEDULE[::2]]
    cancels = [key for key, _ in SCHEDULE[1::4]]

    def setup():
        heap = HEAPS[impl]()
        for key, when in SCHEDULE:
            heap.push(key, when)
        return (heap,), {}

    def run(heap):
        for key, when in moves:
            heap.push(key, when)
        for key in cancels:
            heap.remove(key)
        return len(heap)

    assert benchmark.pedantic(run, setup=setup, rounds=5) == 75_000

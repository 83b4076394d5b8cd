"""The shared indexed heap (heap.pxd/heap.pyx), through both of its entry types at once."""
from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from bunqueue._core.heap import IndexedHeap
from bunqueue._core.readyqueue import ReadyQueue
from bunqueue._core.timers import TimerHeap

KEYS = st.sampled_from([f"k{i}" for i in range(24)])
# Few distinct times, so ties (broken by push order) are common.
TIMES = st.integers(0, 6).map(float)


def test_the_base_is_not_a_heap_of_its_own() -> None:
    with pytest.raises(TypeError):
        IndexedHeap()


def test_both_heaps_share_the_base() -> None:
    assert isinstance(ReadyQueue(), IndexedHeap) and isinstance(TimerHeap(), IndexedHeap)


def test_clear_gives_back_slots_and_keeps_working() -> None:
    timers = TimerHeap()
    for i in range(1000):
        timers.push(f"k{i}", float(i))
    timers.clear()
    assert len(timers) == 0 and "k1" not in timers and timers.pop_due(1e9) == []
    timers.push("again", 1.0)
    assert timers.pop_due(1.0) == ["again"]


class SameOrderMachine(RuleBasedStateMachine):
    """A ReadyQueue ranked by -when and a TimerHeap by when hold the same keys in the same order.

    Both specialisations of the shared sift routines, and the slot bookkeeping under removal, reuse and
    rescheduling, are checked against one model: key -> (when, push stamp).
    """

    def __init__(self) -> None:
        super().__init__()
        self.ready = ReadyQueue()
        self.timers = TimerHeap()
        self.model: dict[str, tuple[float, int]] = {}
        self.stamp = 0

    @rule(key=KEYS, when=TIMES)
    def schedule(self, key: str, when: float) -> None:
        self.stamp += 1
        self.ready.remove(key)
        self.ready.push(key, -when, False, 0.0, self.stamp)
        self.timers.push(key, when)
        self.model[key] = (when, self.stamp)

    @rule(key=KEYS)
    def remove(self, key: str) -> None:
        expected = self.model.pop(key, None) is not None
        assert self.ready.remove(key) is expected
        assert self.timers.remove(key) is expected

    @rule(n=st.integers(0, 5))
    def pop_earliest(self, n: int) -> None:
        expected = [key for key, _ in sorted(self.model.items(), key=lambda item: item[1])[:n]]
        assert self.ready.pop_many(n) == expected
        assert self.timers.pop_due(float("inf"), n) == expected
        for key in expected:
            del self.model[key]

    @rule()
    def clear(self) -> None:
        self.ready.clear()
        self.timers.clear()
        self.model.clear()

    @invariant()
    def same_contents(self) -> None:
        assert len(self.ready) == len(self.timers) == len(self.model)
        assert sorted(self.ready.ids()) == sorted(self.timers.keys()) == sorted(self.model)
        if self.model:
            first = min(self.model.items(), key=lambda item: item[1])[0]
            assert self.ready.peek() == self.timers.peek() == first


TestSameOrder = SameOrderMachine.TestCase
TestSameOrder.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)

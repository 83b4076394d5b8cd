"""TimerHeap: due order, rescheduling, limits, and a stateful comparison with a dict-and-sort model."""
from __future__ import annotations

import math

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bunqueue._core.timers import TimerHeap


def test_empty_heap():
    timers = TimerHeap()
    assert len(timers) == 0
    assert timers.peek() is None
    assert timers.peek_time() is None
    assert timers.when("a") is None
    assert not timers.remove("a")
    assert timers.pop_due(math.inf) == []
    assert "a" not in timers


def test_pop_due_in_time_order_with_ties_in_insertion_order():
    timers = TimerHeap()
    timers.push("c", 30.0)
    timers.push("a", 10.0)
    timers.push("b", 10.0)
    timers.push("d", 20.0)
    assert timers.peek() == "a" and timers.peek_time() == 10.0
    assert timers.pop_due(9.9) == []
    assert timers.pop_due(20.0) == ["a", "b", "d"]
    assert timers.pop_due(100.0) == ["c"]
    assert len(timers) == 0


def test_push_existing_key_reschedules_it():
    timers = TimerHeap()
    timers.push("a", 10.0)
    timers.push("b", 20.0)
    timers.push("a", 30.0)
    assert len(timers) == 2
    assert timers.when("a") == 30.0
    assert timers.pop_due(25.0) == ["b"]
    timers.push("a", 5.0)
    assert timers.peek_time() == 5.0


def test_rescheduled_key_goes_behind_earlier_ties():
    timers = TimerHeap()
    timers.push("a", 10.0)
    timers.push("b", 10.0)
    timers.push("a", 10.0)
    assert timers.pop_due(10.0) == ["b", "a"]


def test_pop_due_limit():
    timers = TimerHeap()
    for i in range(10):
        timers.push(f"k{i}", float(i))
    assert timers.pop_due(100.0, 0) == []
    assert timers.pop_due(100.0, 3) == ["k0", "k1", "k2"]
    assert timers.pop_due(4.0, 10) == ["k3", "k4"]
    assert timers.pop_due(100.0, -1) == [f"k{i}" for i in range(5, 10)]


def test_remove_and_contains():
    timers = TimerHeap()
    for i in range(50):
        timers.push(f"k{i}", float(50 - i))
    assert timers.remove("k49")
    assert not timers.remove("k49")
    assert "k49" not in timers and "k48" in timers
    assert timers.peek() == "k48"
    assert timers.pop_due(math.inf) == [f"k{i}" for i in range(48, -1, -1)]


def test_keys_lists_every_scheduled_key():
    timers = TimerHeap()
    assert timers.keys() == []
    for i, key in enumerate("abcd"):
        timers.push(key, float(i))
    timers.remove("b")
    timers.pop_due(0.0)
    assert sorted(timers.keys()) == ["c", "d"]


def test_clear_then_reuse():
    timers = TimerHeap()
    for i in range(100):
        timers.push(f"k{i}", float(i))
    timers.clear()
    assert len(timers) == 0 and timers.peek() is None and "k1" not in timers
    timers.push("k1", 1.0)
    assert timers.pop_due(1.0) == ["k1"]


def test_infinities_and_nan():
    timers = TimerHeap()
    timers.push("never", math.inf)
    timers.push("always", -math.inf)
    assert timers.pop_due(0.0) == ["always"]
    assert timers.pop_due(math.inf) == ["never"]
    with pytest.raises(ValueError):
        timers.push("x", math.nan)
    assert len(timers) == 0
    with pytest.raises(TypeError):
        timers.push(None, 1.0)


def test_str_subclass_keys_are_refused():
    class Key(str):
        pass

    with pytest.raises(TypeError):
        TimerHeap().push(Key("a"), 1.0)


KEYS = st.sampled_from([f"key-{i}" for i in range(16)])
TIMES = st.one_of(st.integers(0, 40).map(float), st.sampled_from([-math.inf, math.inf]))


class TimerMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.timers = TimerHeap()
        self.model: dict[str, tuple[float, int]] = {}
        self.pushes = 0

    def in_order(self) -> list[str]:
        return sorted(self.model, key=lambda key: self.model[key])

    @rule(key=KEYS, when=TIMES)
    def push(self, key, when):
        self.timers.push(key, when)
        self.pushes += 1
        self.model[key] = (when, self.pushes)

    @rule(key=KEYS)
    def remove(self, key):
        assert self.timers.remove(key) == (key in self.model)
        self.model.pop(key, None)

    @rule(now=TIMES, limit=st.integers(-1, 5))
    def pop_due(self, now, limit):
        due = [key for key in self.in_order() if self.model[key][0] <= now]
        if limit >= 0:
            due = due[:limit]
        assert self.timers.pop_due(now, limit) == due
        for key in due:
            del self.model[key]

    @precondition(lambda self: len(self.model) > 12)
    @rule()
    def clear(self):
        self.timers.clear()
        self.model.clear()

    @invariant()
    def agrees_with_model(self):
        assert len(self.timers) == len(self.model)
        first = self.in_order()[0] if self.model else None
        assert self.timers.peek() == first
        assert self.timers.peek_time() == (self.model[first][0] if first else None)
        for key in [f"key-{i}" for i in range(16)]:
            assert (key in self.timers) == (key in self.model)
            assert self.timers.when(key) == (self.model[key][0] if key in self.model else None)


TimerMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=50, deadline=None)
TestTimerModel = TimerMachine.TestCase

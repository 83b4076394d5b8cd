"""ReadyQueue against its ordering rules, plus a stateful comparison with a sort-based model."""
from __future__ import annotations

import functools
import math

import pytest
from hypothesis import assume, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from bunqueue._core.readyqueue import ReadyQueue

U64_MAX = 2**64 - 1


def test_empty_queue():
    queue = ReadyQueue()
    assert len(queue) == 0
    assert queue.pop() is None
    assert queue.peek() is None
    assert queue.pop_many(5) == []
    assert queue.ids() == []
    assert "x" not in queue


def test_higher_priority_first():
    queue = ReadyQueue()
    queue.push("low", 1.0, False, 0.0, 1)
    queue.push("high", 5.0, False, 9.0, 2)
    queue.push("negative", -3.0, True, 0.0, 3)
    assert queue.pop_many(3) == ["high", "low", "negative"]


def test_lifo_before_fifo_at_equal_priority():
    queue = ReadyQueue()
    queue.push("fifo", 1.0, False, -100.0, 1)
    queue.push("lifo", 1.0, True, 100.0, 2)
    assert queue.pop() == "lifo"


def test_lifo_newest_first_ignoring_run_at():
    queue = ReadyQueue()
    queue.push("old", 0.0, True, 1.0, 10)
    queue.push("new", 0.0, True, 99.0, 11)
    queue.push("oldest", 0.0, True, 0.0, 9)
    assert queue.pop_many(3) == ["new", "old", "oldest"]


def test_fifo_by_run_at_then_seq():
    queue = ReadyQueue()
    queue.push("late", 0.0, False, 20.0, 1)
    queue.push("early-second", 0.0, False, 10.0, 3)
    queue.push("early-first", 0.0, False, 10.0, 2)
    assert queue.pop_many(3) == ["early-first", "early-second", "late"]


def test_push_duplicate_raises_and_changes_nothing():
    queue = ReadyQueue()
    queue.push("a", 0.0, False, 0.0, 1)
    with pytest.raises(KeyError):
        queue.push("a", 9.0, False, 0.0, 2)
    assert len(queue) == 1
    queue.push("b", 1.0, False, 0.0, 3)
    assert queue.pop_many(2) == ["b", "a"]


def test_remove_and_update_by_id():
    queue = ReadyQueue()
    for i in range(10):
        queue.push(f"j{i}", 0.0, False, float(i), i)
    assert queue.remove("j0")
    assert not queue.remove("j0")
    assert not queue.remove("missing")
    assert queue.update("j9", 1.0, False, 9.0)
    assert not queue.update("missing", 1.0, False, 0.0)
    assert queue.peek() == "j9"
    assert queue.update("j9", -1.0, False, 9.0)
    assert queue.pop_many(100) == [f"j{i}" for i in range(1, 9)] + ["j9"]


def test_update_keeps_seq():
    queue = ReadyQueue()
    queue.push("a", 0.0, True, 0.0, 5)
    queue.push("b", 0.0, True, 0.0, 6)
    queue.update("a", 0.0, True, 0.0)
    assert queue.pop() == "b"


def test_pop_many_bounds():
    queue = ReadyQueue()
    for i in range(5):
        queue.push(f"j{i}", 0.0, False, 0.0, i)
    assert queue.pop_many(0) == []
    assert queue.pop_many(2) == ["j0", "j1"]
    assert queue.pop_many(10) == ["j2", "j3", "j4"]
    with pytest.raises(ValueError):
        queue.pop_many(-1)


def test_ids_contains_clear():
    queue = ReadyQueue()
    for i in range(100):
        queue.push(f"j{i}", float(i % 7), i % 3 == 0, float(i), i)
    assert sorted(queue.ids()) == sorted(f"j{i}" for i in range(100))
    assert "j50" in queue and "j100" not in queue and 5 not in queue
    queue.clear()
    assert len(queue) == 0 and queue.pop() is None and "j50" not in queue
    queue.push("j50", 0.0, False, 0.0, 0)
    assert queue.pop() == "j50"


def test_nan_and_bad_arguments_are_refused():
    queue = ReadyQueue()
    with pytest.raises(ValueError):
        queue.push("a", math.nan, False, 0.0, 1)
    with pytest.raises(ValueError):
        queue.push("a", 0.0, False, math.nan, 1)
    with pytest.raises(OverflowError):
        queue.push("a", 0.0, False, 0.0, -1)
    with pytest.raises(OverflowError):
        queue.push("a", 0.0, False, 0.0, 2**64)
    with pytest.raises(TypeError):
        queue.push(None, 0.0, False, 0.0, 1)
    assert len(queue) == 0
    queue.push("a", 0.0, False, 0.0, 1)
    with pytest.raises(ValueError):
        queue.update("a", math.nan, False, 0.0)


def test_str_subclass_ids_are_refused():
    # Exact str keys are what keeps dict operations from running Python code in the middle of a push.
    class Id(str):
        def __hash__(self):
            return 0

    with pytest.raises(TypeError):
        ReadyQueue().push(Id("a"), 0.0, False, 0.0, 1)


def test_extreme_values_order():
    queue = ReadyQueue()
    queue.push("max-seq", 0.0, False, 0.0, U64_MAX)
    queue.push("min-seq", 0.0, False, 0.0, 0)
    queue.push("inf", math.inf, False, math.inf, 7)
    queue.push("-inf", -math.inf, False, -math.inf, 8)
    assert queue.pop_many(4) == ["inf", "min-seq", "max-seq", "-inf"]


def test_large_interleaved_workload_stays_sorted():
    queue = ReadyQueue()
    n = 20000
    for i in range(n):
        queue.push(f"j{i}", float((i * 7919) % 13), False, float((i * 104729) % 1000), i)
    for i in range(0, n, 3):
        assert queue.remove(f"j{i}")
    out = queue.pop_many(n)
    keys = [(-float((int(j[1:]) * 7919) % 13), float((int(j[1:]) * 104729) % 1000), int(j[1:])) for j in out]
    assert keys == sorted(keys)
    assert len(out) == n - len(range(0, n, 3))


# The model states the ordering rules literally and finds the best entry by sorting.
def model_compare(a: tuple, b: tuple) -> int:
    (a_priority, a_lifo, a_run_at, a_seq), (b_priority, b_lifo, b_run_at, b_seq) = a, b
    if a_priority != b_priority:
        return -1 if a_priority > b_priority else 1
    if a_lifo != b_lifo:
        return -1 if a_lifo else 1
    if a_lifo:
        return -1 if a_seq > b_seq else 1
    if a_run_at != b_run_at:
        return -1 if a_run_at < b_run_at else 1
    return -1 if a_seq < b_seq else 1 if a_seq > b_seq else 0


IDS = st.sampled_from([f"job-{i}" for i in range(24)])
PRIORITIES = st.sampled_from([-math.inf, -1.0, 0.0, -0.0, 1.0, 2.5, math.inf])
RUN_ATS = st.one_of(st.sampled_from([0.0, 1.0, 5.0]), st.floats(allow_nan=False))
SEQS = st.one_of(st.sampled_from([0, 1, U64_MAX]), st.integers(0, U64_MAX))


class ReadyQueueMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.queue = ReadyQueue()
        self.model: dict[str, tuple] = {}

    def ranked(self) -> list[str]:
        key = functools.cmp_to_key(model_compare)
        return sorted(self.model, key=lambda job_id: key(self.model[job_id]))

    @rule(job_id=IDS, priority=PRIORITIES, lifo=st.booleans(), run_at=RUN_ATS, seq=SEQS)
    def push(self, job_id, priority, lifo, run_at, seq):
        assume(all(entry[3] != seq for entry in self.model.values()))
        if job_id in self.model:
            with pytest.raises(KeyError):
                self.queue.push(job_id, priority, lifo, run_at, seq)
            return
        self.queue.push(job_id, priority, lifo, run_at, seq)
        self.model[job_id] = (priority, lifo, run_at, seq)

    @rule()
    def pop(self):
        expected = self.ranked()[0] if self.model else None
        assert self.queue.pop() == expected
        self.model.pop(expected, None)

    @rule(n=st.integers(0, 6))
    def pop_many(self, n):
        expected = self.ranked()[:n]
        assert self.queue.pop_many(n) == expected
        for job_id in expected:
            del self.model[job_id]

    @rule(job_id=IDS)
    def remove(self, job_id):
        assert self.queue.remove(job_id) == (job_id in self.model)
        self.model.pop(job_id, None)

    @rule(job_id=IDS, priority=PRIORITIES, lifo=st.booleans(), run_at=RUN_ATS)
    def update(self, job_id, priority, lifo, run_at):
        assert self.queue.update(job_id, priority, lifo, run_at) == (job_id in self.model)
        if job_id in self.model:
            self.model[job_id] = (priority, lifo, run_at, self.model[job_id][3])

    @precondition(lambda self: len(self.model) > 15)
    @rule()
    def clear(self):
        self.queue.clear()
        self.model.clear()

    @invariant()
    def agrees_with_model(self):
        assert len(self.queue) == len(self.model)
        assert self.queue.peek() == (self.ranked()[0] if self.model else None)
        assert sorted(self.queue.ids()) == sorted(self.model)
        for job_id in self.model:
            assert job_id in self.queue


ReadyQueueMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=50, deadline=None)
TestReadyQueueModel = ReadyQueueMachine.TestCase

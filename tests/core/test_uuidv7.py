"""UuidV7Source against RFC 9562 (layout, monotonic job ids, random tokens), plus a stateful model test."""
from __future__ import annotations

import os
import pickle
import threading
import time
import uuid

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, precondition, rule

from bunqueue._core.uuidv7 import UuidV7Source

MAX_MS = 2**48 - 1
COUNTER_MAX = 2**74 - 1
# A recent Unix millisecond, so the ids look like the broker's.
BASE_MS = 1_780_000_000_000


def parse(text: str) -> tuple[int, int]:
    """(ms, 74-bit counter) of a UUIDv7 string, after checking its form, version and variant."""
    value = uuid.UUID(text)
    assert str(value) == text
    assert value.version == 7 and value.variant == uuid.RFC_4122
    number = value.int
    return number >> 80, ((number >> 64) & 0xFFF) << 62 | (number & (2**62 - 1))


def make(ms: int, counter: int) -> str:
    """The UUIDv7 string with this millisecond and counter."""
    rand_a, rand_b = counter >> 62, counter & (2**62 - 1)
    return str(uuid.UUID(int=ms << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b))


def clock_ms() -> int:
    return time.time_ns() // 1_000_000


def test_ids_and_tokens_are_uuid7_at_the_clock() -> None:
    source = UuidV7Source()
    before = clock_ms()
    job_id, token = source.next_id(), source.new_token()
    after = clock_ms()
    assert before <= parse(job_id)[0] <= after
    assert before <= parse(token)[0] <= after


def test_given_millisecond_is_embedded() -> None:
    source = UuidV7Source()
    assert parse(source.next_id_at(BASE_MS))[0] == BASE_MS
    assert parse(source.new_token_at(12345))[0] == 12345
    assert parse(UuidV7Source().next_id_at(0))[0] == 0
    assert parse(UuidV7Source().next_id_at(MAX_MS))[0] == MAX_MS


def test_millisecond_out_of_range_is_refused() -> None:
    source = UuidV7Source()
    for ms in (-1, MAX_MS + 1):
        with pytest.raises(ValueError):
            source.next_id_at(ms)
        with pytest.raises(ValueError):
            source.new_token_at(ms)


def test_ids_count_on_within_a_millisecond() -> None:
    source = UuidV7Source()
    ids = [source.next_id_at(BASE_MS) for _ in range(1000)]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    first = parse(ids[0])[1]
    # Fresh bits with the top one clear: room for at least 2**73 increments.
    assert first < 2**73
    assert [parse(i) for i in ids] == [(BASE_MS, first + k) for k in range(1000)]


def test_a_new_millisecond_takes_fresh_bits() -> None:
    source = UuidV7Source()
    counters = []
    previous = ""
    for k in range(200):
        job_id = source.next_id_at(BASE_MS + k)
        assert job_id > previous
        previous = job_id
        ms, counter = parse(job_id)
        assert ms == BASE_MS + k and counter < 2**73
        counters.append(counter)
    # 73 random bits each: no two alike, and not one counter counting on.
    assert len(set(counters)) == len(counters)
    assert sum(b - a == 1 for a, b in zip(counters, counters[1:])) == 0


def test_clock_standing_still_or_going_back_keeps_ids_increasing() -> None:
    source = UuidV7Source()
    ms, counter = parse(source.next_id_at(BASE_MS))
    for clock in (BASE_MS, BASE_MS - 1, BASE_MS - 60_000, 0, BASE_MS):
        counter += 1
        assert parse(source.next_id_at(clock)) == (BASE_MS, counter)
    assert parse(source.next_id_at(BASE_MS + 1))[0] == BASE_MS + 1


def test_counter_overflow_advances_the_millisecond() -> None:
    source = UuidV7Source()
    source.resume_after(make(BASE_MS, COUNTER_MAX - 1))
    assert parse(source.next_id_at(BASE_MS)) == (BASE_MS, COUNTER_MAX)
    last = make(BASE_MS, COUNTER_MAX)
    nxt = source.next_id_at(BASE_MS)
    ms, counter = parse(nxt)
    assert nxt > last and ms == BASE_MS + 1 and counter < 2**73
    # The clock still reads the old millisecond: ids count on in the borrowed one.
    assert parse(source.next_id_at(BASE_MS - 5)) == (BASE_MS + 1, counter + 1)


def test_resume_after_only_moves_forward() -> None:
    source = UuidV7Source()
    current = source.next_id_at(BASE_MS)
    source.resume_after(make(BASE_MS - 1, COUNTER_MAX))
    assert parse(source.next_id_at(BASE_MS)) == (BASE_MS, parse(current)[1] + 1)
    source.resume_after(make(BASE_MS + 7, 5))
    assert parse(source.next_id_at(BASE_MS)) == (BASE_MS + 7, 6)
    with pytest.raises(ValueError):
        source.resume_after(str(uuid.uuid4()))
    with pytest.raises(ValueError):
        source.resume_after("not a uuid")


def test_tokens_are_random_and_leave_job_ids_alone() -> None:
    source = UuidV7Source()
    ms, counter = parse(source.next_id_at(BASE_MS))
    # More than one pool's worth (409 draws), so refills are crossed.
    tokens = [source.new_token_at(BASE_MS) for _ in range(2000)]
    assert parse(source.next_id_at(BASE_MS)) == (BASE_MS, counter + 1)
    counters = [parse(t)[1] for t in tokens]
    assert {parse(t)[0] for t in tokens} == {BASE_MS}
    assert len(set(counters)) == len(counters)
    assert all(abs(b - a) > 1 for a, b in zip(counters, counters[1:]))
    # All 74 bits are random: the top one too (the chance it is never set is 2**-2000).
    assert any(c >= 2**73 for c in counters)
    # Each of the 74 bits varies.
    ones = [sum(c >> bit & 1 for c in counters) for bit in range(74)]
    assert all(500 < n < 1500 for n in ones)


def test_many_ids_are_unique_and_ordered() -> None:
    source = UuidV7Source()
    ids = [source.next_id() for _ in range(100_000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)
    assert [uuid.UUID(i).int for i in ids] == sorted(uuid.UUID(i).int for i in ids)


def test_threads_sharing_a_source_get_unique_increasing_ids() -> None:
    source = UuidV7Source()
    results: list[list[str]] = [[] for _ in range(4)]

    def work(out: list[str]) -> None:
        for k in range(20_000):
            out.append(source.next_id() if k % 3 else source.new_token())

    threads = [threading.Thread(target=work, args=(out,)) for out in results]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [i for out in results for i in out]
    assert len(set(everything)) == len(everything)
    for out in results:
        ids = [i for k, i in enumerate(out) if k % 3]
        assert ids == sorted(ids)


def test_sources_do_not_repeat_each_other() -> None:
    a, b = UuidV7Source(), UuidV7Source()
    assert a.next_id_at(BASE_MS) != b.next_id_at(BASE_MS)
    assert a.new_token_at(BASE_MS) != b.new_token_at(BASE_MS)


def test_a_source_is_not_copied() -> None:
    with pytest.raises(TypeError):
        pickle.dumps(UuidV7Source())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_forked_child_does_not_repeat_its_parent() -> None:
    source = UuidV7Source()
    first = source.next_id_at(BASE_MS)
    source.new_token_at(BASE_MS)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.close(read_end)
            os.write(write_end, f"{source.next_id_at(BASE_MS)} {source.new_token_at(BASE_MS)}".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        child_id, child_token = pipe.read().split()
    os.waitpid(pid, 0)
    parent_id, parent_token = source.next_id_at(BASE_MS), source.new_token_at(BASE_MS)
    assert parse(parent_id) == (BASE_MS, parse(first)[1] + 1)
    # The child starts from fresh bits in the next millisecond: after its parent's ids, unlike them.
    assert child_id > first and parse(child_id)[0] == BASE_MS + 1
    assert child_id != parent_id and child_token != parent_token


class SourceMachine(RuleBasedStateMachine):
    """The rule: embedded ms = max(clock, last), or last + 1 when the counter is spent; fresh bits (top one
    clear) in a new millisecond, +1 in the same one; ids strictly increasing; tokens change nothing."""

    def __init__(self) -> None:
        super().__init__()
        self.source = UuidV7Source()
        self.last: tuple[int, int] | None = None
        self.last_id = ""

    @rule(clock=st.integers(BASE_MS - 20, BASE_MS + 40) | st.integers(0, MAX_MS - 10))
    def next_id(self, clock: int) -> None:
        job_id = self.source.next_id_at(clock)
        ms, counter = parse(job_id)
        if self.last is None or clock > self.last[0]:
            assert ms == clock and counter < 2**73
        elif self.last[1] < COUNTER_MAX:
            assert (ms, counter) == (self.last[0], self.last[1] + 1)
        else:
            assert ms == self.last[0] + 1 and counter < 2**73
        assert job_id > self.last_id
        if self.last_id:
            assert uuid.UUID(job_id).int > uuid.UUID(self.last_id).int
        self.last, self.last_id = (ms, counter), job_id

    @rule(clock=st.integers(BASE_MS - 20, BASE_MS + 40))
    def token(self, clock: int) -> None:
        assert parse(self.source.new_token_at(clock))[0] == clock

    @precondition(lambda self: self.last is not None and self.last[0] < MAX_MS - 5)
    @rule(left=st.integers(0, 2), ahead=st.integers(-1, 1))
    def near_counter_end(self, left: int, ahead: int) -> None:
        assert self.last is not None
        target = (max(0, self.last[0] + ahead), COUNTER_MAX - left)
        self.source.resume_after(make(*target))
        if target > self.last:
            self.last, self.last_id = target, make(*target)


SourceMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
TestSourceMachine = SourceMachine.TestCase

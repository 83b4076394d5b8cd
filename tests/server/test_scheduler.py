"""The deadline scheduler: one loop timer per kind, armed for the earliest deadline, re-armed by the
handler's answer, never stopped by a failing handler."""
from __future__ import annotations

import asyncio

from bunqueue.broker.clock import now_ms
from bunqueue.server.scheduler import MAX_STEP_MS, DeadlineScheduler


async def test_arms_for_the_earliest_and_rearms_from_the_handler() -> None:
    loop = asyncio.get_running_loop()
    fired: list[float] = []
    pending: list[float] = []

    def handler(now: float) -> float | None:
        fired.append(now)
        return pending.pop() if pending else None

    scheduler = DeadlineScheduler(loop, {"k": handler})
    start = now_ms()
    # The handler's answer is measured from the same instant as the assertions below.
    pending.append(start + 60.0)
    scheduler.arm("k", start + 10_000)
    scheduler.arm("k", start + 20)
    # A later deadline never postpones the armed one.
    scheduler.arm("k", start + 5_000)
    assert scheduler.when("k") == start + 20
    await asyncio.sleep(0.15)
    assert len(fired) == 2
    assert fired[0] >= start + 20 and fired[1] >= start + 60
    assert scheduler.when("k") is None


async def test_kinds_are_independent() -> None:
    loop = asyncio.get_running_loop()
    fired: list[str] = []
    scheduler = DeadlineScheduler(
        loop, {"a": lambda now: fired.append("a"), "b": lambda now: fired.append("b")}
    )
    scheduler.arm("a", now_ms() + 30)
    scheduler.arm("b", now_ms())
    await asyncio.sleep(0.01)
    assert fired == ["b"] and scheduler.when("a") is not None
    await asyncio.sleep(0.05)
    assert fired == ["b", "a"]


async def test_a_failing_handler_runs_again_later() -> None:
    loop = asyncio.get_running_loop()
    calls: list[float] = []

    def handler(now: float) -> float | None:
        calls.append(now)
        raise RuntimeError("boom")

    scheduler = DeadlineScheduler(loop, {"k": handler})
    scheduler.arm("k", now_ms())
    await asyncio.sleep(0.02)
    assert len(calls) == 1
    when = scheduler.when("k")
    assert when is not None and when >= calls[0] + 999
    scheduler.cancel()
    assert scheduler.when("k") is None


async def test_far_deadlines_are_taken_in_steps() -> None:
    loop = asyncio.get_running_loop()
    scheduler = DeadlineScheduler(loop, {"k": lambda now: None})
    far = now_ms() + 10 * MAX_STEP_MS
    scheduler.arm("k", far)
    handle = scheduler.armed["k"][1]
    assert handle.when() - loop.time() <= MAX_STEP_MS / 1000.0 + 1
    assert scheduler.when("k") == far
    scheduler.cancel()


async def test_a_timer_that_fires_early_waits_out_the_rest() -> None:
    loop = asyncio.get_running_loop()
    fired: list[float] = []
    scheduler = DeadlineScheduler(loop, {"k": fired.append})
    deadline = now_ms() + 50
    scheduler.arm("k", deadline)
    # What the loop does when its cached clock runs ahead of the wall clock the deadline is kept in: the
    # armed timer runs now, in place of later.
    scheduler.armed["k"][1].cancel()
    scheduler.fire("k")
    assert fired == []
    assert scheduler.when("k") == deadline
    await asyncio.sleep(0.12)
    assert len(fired) == 1 and fired[0] >= deadline

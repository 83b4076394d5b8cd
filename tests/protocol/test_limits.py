"""RateLimit, RateLimitClear, SetConcurrency, ClearConcurrency and GetQueueLimits, and how the limits
shape PULL/PULLB: partial batches, long-pollers woken when a token is due or a slot frees, and no effect
on the queues next door."""
from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest

from bunqueue.client import Connection

NO_LIMITS = {"rateLimit": None, "rateLimitTtl": -2, "concurrencyLimit": None, "maxed": False}


async def push_many(conn: Connection, queue: str, n: int) -> list[str]:
    jobs = [{"name": f"j{i}", "data": i} for i in range(n)]
    return (await conn.request({"cmd": "PUSHB", "queue": queue, "jobs": jobs}))["ids"]


async def limits(conn: Connection, queue: str, **extra: Any) -> dict[str, Any]:
    return (await conn.request({"cmd": "GetQueueLimits", "queue": queue, **extra}))["data"]["limits"]


async def names(conn: Connection, queue: str, count: int = 10) -> list[str]:
    return [j["name"] for j in (await conn.request({"cmd": "PULLB", "queue": queue, "count": count}))["jobs"]]


async def test_rate_limit_caps_claims_until_cleared(conn: Connection, queue_name: str) -> None:
    assert await limits(conn, queue_name) == NO_LIMITS
    assert (await conn.request({"cmd": "RateLimit", "queue": queue_name, "limit": 2, "duration": 60000}))[
        "ok"
    ]
    assert await limits(conn, queue_name) == {
        "rateLimit": {"max": 2, "duration": 60000},
        "rateLimitTtl": 0,
        "concurrencyLimit": None,
        "maxed": False,
    }
    await push_many(conn, queue_name, 4)
    assert await names(conn, queue_name) == ["j0", "j1"]
    assert (await conn.request({"cmd": "PULL", "queue": queue_name}))["job"] is None
    # Two tokens per minute: the next is due in about 30 s.
    assert 29000 <= (await limits(conn, queue_name))["rateLimitTtl"] <= 30000
    assert (await conn.request({"cmd": "RateLimitClear", "queue": queue_name}))["ok"]
    assert await names(conn, queue_name) == ["j2", "j3"]
    assert await limits(conn, queue_name) == NO_LIMITS


@pytest.mark.parametrize("limit", [None, "abc", float("nan"), float("inf"), True, [1]])
async def test_rate_limit_and_concurrency_need_a_finite_limit(
    conn: Connection, queue_name: str, limit: Any
) -> None:
    for cmd in ("RateLimit", "SetConcurrency"):
        request = {"cmd": cmd, "queue": queue_name}
        if limit is not None:
            request["limit"] = limit
        reply = await conn.request(request)
        assert (reply["ok"], reply["error"]) == (False, "limit must be a finite number")


async def test_limit_commands_validate_the_queue_name(conn: Connection) -> None:
    for cmd in ("RateLimit", "RateLimitClear", "SetConcurrency", "ClearConcurrency", "GetQueueLimits"):
        assert (await conn.request({"cmd": cmd, "limit": 1}))["error"] == "Queue name is required"
        assert (await conn.request({"cmd": cmd, "queue": "a b", "limit": 1}))["error"] == (
            "Queue name contains invalid characters"
        )


async def test_rate_limit_options_fall_back_and_coerce(conn: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "RateLimit", "queue": queue_name, "limit": "3", "duration": -5, "ttl": "abc"})
    assert (await limits(conn, queue_name))["rateLimit"] == {"max": 3, "duration": 1000}
    await conn.request({"cmd": "RateLimit", "queue": queue_name, "limit": 2.5, "duration": "500"})
    assert (await limits(conn, queue_name))["rateLimit"] == {"max": 2.5, "duration": 500}
    # A fractional limit admits whole tokens only.
    await push_many(conn, queue_name, 4)
    assert len(await names(conn, queue_name)) == 2


async def test_rate_limit_ttl_expires_by_itself(conn: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "RateLimit", "queue": queue_name, "limit": 1, "duration": 60000, "ttl": 300})
    assert 0 < (await limits(conn, queue_name))["rateLimitTtl"] <= 300
    await push_many(conn, queue_name, 3)
    assert await names(conn, queue_name) == ["j0"]
    # A long-poller blocked by the limit is woken when it lapses.
    started = time.monotonic()
    reply = await conn.request({"cmd": "PULL", "queue": queue_name, "timeout": 3000})
    assert reply["job"]["name"] == "j1" and time.monotonic() - started < 1.5
    assert await limits(conn, queue_name) == NO_LIMITS


async def test_max_jobs_probe(conn: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "RateLimit", "queue": queue_name, "limit": 3, "duration": 60000})
    await push_many(conn, queue_name, 3)
    assert len(await names(conn, queue_name, 3)) == 3
    assert (await limits(conn, queue_name))["rateLimitTtl"] > 0
    # 0 until at least maxJobs tokens were consumed in the window.
    assert (await limits(conn, queue_name, maxJobs=10))["rateLimitTtl"] == 0
    assert (await limits(conn, queue_name, maxJobs=2))["rateLimitTtl"] > 0
    assert (await limits(conn, queue_name, maxJobs="x"))["rateLimitTtl"] > 0


async def test_rate_limited_long_poller_wakes_when_a_token_is_due(
    conn: Connection, conn2: Connection, queue_name: str
) -> None:
    await conn.request({"cmd": "RateLimit", "queue": queue_name, "limit": 4, "duration": 1000})
    await push_many(conn, queue_name, 6)
    assert len(await names(conn, queue_name)) == 4
    started = time.monotonic()
    reply = await conn2.request({"cmd": "PULL", "queue": queue_name, "timeout": 5000})
    waited = time.monotonic() - started
    # One token every 250 ms.
    assert reply["job"]["name"] == "j4" and 0.1 < waited < 1.0, waited


async def test_a_limited_queue_does_not_hold_up_another(
    conn: Connection, conn2: Connection, queue_name: str
) -> None:
    limited, free = f"{queue_name}-l", f"{queue_name}-f"
    await conn.request({"cmd": "RateLimit", "queue": limited, "limit": 1, "duration": 60000})
    await conn.request({"cmd": "SetConcurrency", "queue": limited, "limit": 1})
    await push_many(conn, limited, 3)
    assert len(await names(conn, limited)) == 1
    blocked = conn.request_nowait({"cmd": "PULL", "queue": limited, "timeout": 2000})
    waiting_free = conn2.request_nowait({"cmd": "PULL", "queue": free, "timeout": 2000})
    await asyncio.sleep(0.05)
    started = time.monotonic()
    await conn.request({"cmd": "PUSH", "queue": free, "name": "f", "data": 1})
    assert (await asyncio.wait_for(waiting_free, 1))["job"]["name"] == "f"
    assert time.monotonic() - started < 0.5
    assert (await conn2.request({"cmd": "PULLB", "queue": free, "count": 5}))["jobs"] == []
    assert (await asyncio.wait_for(blocked, 3))["job"] is None


async def test_concurrency_limit_and_maxed(conn: Connection, queue_name: str) -> None:
    assert (await conn.request({"cmd": "SetConcurrency", "queue": queue_name, "limit": 1}))["ok"]
    ids = await push_many(conn, queue_name, 3)
    first = await conn.request({"cmd": "PULL", "queue": queue_name})
    assert first["job"]["name"] == "j0"
    assert (await conn.request({"cmd": "PULL", "queue": queue_name}))["job"] is None
    assert await limits(conn, queue_name) == {
        "rateLimit": None,
        "rateLimitTtl": -2,
        "concurrencyLimit": 1,
        "maxed": True,
    }
    await conn.request({"cmd": "ACK", "id": ids[0]})
    assert await names(conn, queue_name) == ["j1"]
    assert (await conn.request({"cmd": "ClearConcurrency", "queue": queue_name}))["ok"]
    assert await names(conn, queue_name) == ["j2"]
    assert await limits(conn, queue_name) == NO_LIMITS
    # Clearing what was never set is fine.
    assert (await conn.request({"cmd": "ClearConcurrency", "queue": f"{queue_name}-never"}))["ok"]
    assert (await conn.request({"cmd": "RateLimitClear", "queue": f"{queue_name}-never"}))["ok"]


async def test_concurrency_counts_jobs_already_running(conn: Connection, queue_name: str) -> None:
    await push_many(conn, queue_name, 3)
    await conn.request({"cmd": "PULLB", "queue": queue_name, "count": 2})
    await conn.request({"cmd": "SetConcurrency", "queue": queue_name, "limit": 2})
    assert (await limits(conn, queue_name))["maxed"] is True
    assert (await conn.request({"cmd": "PULL", "queue": queue_name}))["job"] is None


async def test_fractional_concurrency_rounds_up(conn: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "SetConcurrency", "queue": queue_name, "limit": 1.5})
    await push_many(conn, queue_name, 3)
    assert len(await names(conn, queue_name)) == 2
    assert (await limits(conn, queue_name))["concurrencyLimit"] == 1.5


async def test_a_freed_slot_wakes_a_long_poller(conn: Connection, conn2: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "SetConcurrency", "queue": queue_name, "limit": 1})
    ids = await push_many(conn, queue_name, 2)
    await conn.request({"cmd": "PULL", "queue": queue_name})
    waiting = conn2.request_nowait({"cmd": "PULL", "queue": queue_name, "timeout": 3000})
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await conn.request({"cmd": "FAIL", "id": ids[0], "error": "x"})
    assert (await asyncio.wait_for(waiting, 1))["job"]["name"] == "j1"


async def test_raising_the_limit_wakes_long_pollers(
    conn: Connection, conn2: Connection, queue_name: str
) -> None:
    await conn.request({"cmd": "SetConcurrency", "queue": queue_name, "limit": 0})
    await push_many(conn, queue_name, 1)
    waiting = conn2.request_nowait({"cmd": "PULL", "queue": queue_name, "timeout": 3000})
    await asyncio.sleep(0.05)
    await conn.request({"cmd": "SetConcurrency", "queue": queue_name, "limit": 5})
    assert (await asyncio.wait_for(waiting, 1))["job"]["name"] == "j0"


async def test_limited_queue_is_listed(conn: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "RateLimit", "queue": queue_name, "limit": 5})
    assert queue_name in (await conn.request({"cmd": "ListQueues"}))["queues"]


async def test_a_rate_too_small_to_refill_a_token_has_an_infinite_ttl(conn: Connection, queue_name: str) -> None:
    # 1e-310 per second: (1 - tokens) / rate overflows to infinity, which the original answers as it is.
    await conn.request({"cmd": "RateLimit", "queue": queue_name, "limit": 1e-310})
    await push_many(conn, queue_name, 1)
    found = await limits(conn, queue_name)
    assert found["rateLimit"] == {"max": 1e-310, "duration": 1000}
    assert found["rateLimitTtl"] == math.inf

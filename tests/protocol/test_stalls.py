"""SetStallConfig / GetStallConfig and stall detection end to end (the exact timing and the two phases
are covered without sleeping in tests/broker/timers/test_stalls.py)."""
from __future__ import annotations

import asyncio
import time
from typing import Any

from bunqueue.client import Connection

DEFAULTS = {"enabled": True, "stallInterval": 30000, "maxStalls": 3, "gracePeriod": 5000}


async def config(conn: Connection, queue: str) -> dict[str, Any]:
    reply = await conn.request({"cmd": "GetStallConfig", "queue": queue})
    assert reply["ok"], reply
    return reply["config"]


async def test_stall_config_defaults_merge_and_coercion(conn: Connection, queue_name: str) -> None:
    assert await config(conn, queue_name) == DEFAULTS
    reply = await conn.request(
        {
            "cmd": "SetStallConfig",
            "queue": queue_name,
            "config": {"stallInterval": "1000", "maxStalls": "x", "gracePeriod": 5},
        }
    )
    assert reply["ok"]
    assert await config(conn, queue_name) == {
        "enabled": True,
        "stallInterval": 1000,
        "maxStalls": 3,
        "gracePeriod": 5,
    }
    await conn.request(
        {
            "cmd": "SetStallConfig",
            "queue": queue_name,
            "config": {"enabled": False, "maxStalls": None, "unknown": 1},
        }
    )
    assert await config(conn, queue_name) == {
        "enabled": False,
        "stallInterval": 1000,
        "maxStalls": None,
        "gracePeriod": 5,
    }
    # Anything but a map changes nothing; other queues keep the defaults.
    assert (await conn.request({"cmd": "SetStallConfig", "queue": queue_name, "config": "x"}))["ok"]
    assert (await config(conn, queue_name))["enabled"] is False
    assert await config(conn, f"{queue_name}-other") == DEFAULTS
    assert (await conn.request({"cmd": "GetStallConfig"}))["error"] == "Queue name is required"
    assert (await conn.request({"cmd": "SetStallConfig", "queue": "a b"}))["error"] == (
        "Queue name contains invalid characters"
    )


async def test_silent_job_is_retried_then_dead_lettered(conn: Connection, queue_name: str) -> None:
    await conn.request(
        {
            "cmd": "SetStallConfig",
            "queue": queue_name,
            "config": {"stallInterval": 200, "gracePeriod": 0, "maxStalls": 2},
        }
    )
    job_id = (await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "s", "data": 1, "backoff": 0}))[
        "id"
    ]
    started = time.monotonic()
    await conn.request({"cmd": "PULL", "queue": queue_name})
    # Found stalled after 200 ms, acted on once still stalled one check period (5 s) later.
    for _ in range(400):
        job = (await conn.request({"cmd": "GetJob", "id": job_id}))["job"]
        if job["state"] != "active":
            break
        await asyncio.sleep(0.025)
    elapsed = time.monotonic() - started
    assert 5.0 < elapsed < 7.0, elapsed
    assert (job["state"], job["attempts"], job["stallCount"], job["startedAt"]) == ("waiting", 1, 1, None)
    assert job["timeline"][-2:] == [
        {"state": "failed", "timestamp": job["timeline"][-2]["timestamp"], "error": "stalled", "attempt": 1},
        {"state": "waiting", "timestamp": job["timeline"][-1]["timestamp"], "attempt": 2},
    ]
    # The worker that lost it reports it done after all: the requeued job completes.
    assert (await conn.request({"cmd": "ACK", "id": job_id, "result": "late"}))["ok"]
    assert (await conn.request({"cmd": "GetState", "id": job_id}))["state"] == "completed"


async def test_heartbeats_keep_a_job_alive(conn: Connection, queue_name: str) -> None:
    await conn.request(
        {"cmd": "SetStallConfig", "queue": queue_name, "config": {"stallInterval": 150, "gracePeriod": 0}}
    )
    job_id = (await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "s", "data": 1}))["id"]
    await conn.request({"cmd": "PULL", "queue": queue_name})
    for _ in range(12):
        await asyncio.sleep(0.1)
        assert (await conn.request({"cmd": "JobHeartbeat", "id": job_id}))["ok"]
    assert (await conn.request({"cmd": "ACK", "id": job_id}))["ok"]


async def test_disabled_detection_leaves_jobs_alone(conn: Connection, queue_name: str) -> None:
    await conn.request(
        {
            "cmd": "SetStallConfig",
            "queue": queue_name,
            "config": {"enabled": False, "stallInterval": 1, "gracePeriod": 0},
        }
    )
    job_id = (await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "s", "data": 1}))["id"]
    await conn.request({"cmd": "PULL", "queue": queue_name})
    await asyncio.sleep(0.3)
    assert (await conn.request({"cmd": "GetState", "id": job_id}))["state"] == "active"


async def test_lease_expiry_honours_the_queue_max_stalls(conn: Connection, queue_name: str) -> None:
    await conn.request({"cmd": "SetStallConfig", "queue": queue_name, "config": {"maxStalls": 1}})
    job_id = (await conn.request({"cmd": "PUSH", "queue": queue_name, "name": "s", "data": 1}))["id"]
    await conn.request({"cmd": "PULL", "queue": queue_name, "owner": "w", "lockTtl": 50})
    for _ in range(100):
        if (await conn.request({"cmd": "GetState", "id": job_id}))["state"] == "failed":
            break
        await asyncio.sleep(0.02)
    entry = (await conn.request({"cmd": "Dlq", "queue": queue_name}))["entries"][0]
    assert (entry["reason"], entry["error"]) == ("stalled", "Lock expired")

"""A data file written by the Bun original itself: its server started on a path, driven over TCP into every
job state, then stopped. What it was told is returned, so a test can check what another server reads back.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bunqueue._testbase.frames import RawClient
from tests.compat.brokers import HOST, ReferenceProcess

MAIN = "imp-main"
ACTIVE = "imp-active"
DONE = "imp-done"
FAILED = "imp-failed"
FLOW = "imp-flow"
PAUSED = "imp-paused"
CRON = "imp-cron"
CRON_QUEUE = "imp-cron-q"
# A schedule far from now: the cron must not fire while the test runs.
CRON_SCHEDULE = "0 0 1 1 *"


@dataclass
class Written:
    """What the original was asked to keep: job ids by role, and the settings it was given."""

    ids: dict[str, str] = field(default_factory=dict)
    # Waiting jobs of MAIN in the order a worker gets them (priority first, then push order).
    pull_order: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    results: dict[str, Any] = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)
    cron_next_run: float = 0.0
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)


def _push(client: RawClient, written: Written, role: str, queue: str, **opts: Any) -> str:
    data = {"role": role, "n": len(written.ids)}
    reply = client.ok({"cmd": "PUSH", "queue": queue, "name": f"job-{role}", "data": data, **opts})
    written.ids[role] = str(reply["id"])
    written.data[role] = data
    return str(reply["id"])


def _pull(client: RawClient, queue: str) -> dict[str, Any]:
    job = client.ok({"cmd": "PULL", "queue": queue})["job"]
    assert job is not None, queue
    return dict(job)


def drive(client: RawClient) -> Written:
    """Put the original's broker into every state a file can hold."""
    w = Written()
    _push(client, w, "low", MAIN)
    _push(client, w, "high", MAIN, priority=10)
    _push(client, w, "mid", MAIN, priority=5, jobId="order-42", uniqueKey="uk-mid")
    _push(client, w, "low2", MAIN)
    w.pull_order = [w.ids["high"], w.ids["mid"], w.ids["low"], w.ids["low2"]]
    _push(client, w, "delayed", MAIN, delay=3_600_000)
    client.ok({"cmd": "RateLimit", "queue": MAIN, "limit": 500})
    client.ok({"cmd": "SetConcurrency", "queue": MAIN, "limit": 7})

    _push(client, w, "active", ACTIVE, maxAttempts=5)
    assert _pull(client, ACTIVE)["id"] == w.ids["active"]
    client.ok({"cmd": "Progress", "id": w.ids["active"], "progress": 40, "message": "halfway"})
    client.ok({"cmd": "AddLog", "id": w.ids["active"], "message": "started"})

    _push(client, w, "done", DONE)
    assert _pull(client, DONE)["id"] == w.ids["done"]
    w.results["done"] = {"total": 3, "items": ["a", "b"]}
    client.ok({"cmd": "ACK", "id": w.ids["done"], "result": w.results["done"]})

    client.ok({"cmd": "SetDlqConfig", "queue": FAILED, "config": {"maxEntries": 321}})
    client.ok({"cmd": "SetStallConfig", "queue": FAILED, "config": {"maxStalls": 4}})
    _push(client, w, "failed", FAILED, maxAttempts=1)
    assert _pull(client, FAILED)["id"] == w.ids["failed"]
    client.ok({"cmd": "FAIL", "id": w.ids["failed"], "error": "boom"})

    kids = ["flow-child-1", "flow-child-2"]
    graph: list[dict[str, Any]] = [{"id": "flow-parent", "queue": FLOW, "input": {
        "name": "parent", "data": {"__childrenIds": kids}, "childrenIds": kids, "dependsOn": kids}}]
    graph += [{"id": kid, "queue": FLOW, "input": {
        "name": kid, "data": {"__parentId": "flow-parent", "__parentQueue": FLOW}, "parentId": "flow-parent"}}
        for kid in kids]
    flow = client.ok({"cmd": "PUSHF", "jobs": graph})
    for job in flow["data"]["jobs"]:
        w.ids[job["id"]] = job["id"]
        w.data[job["id"]] = job["data"]
    child = _pull(client, FLOW)
    client.ok({"cmd": "ACK", "id": child["id"], "result": "child-done"})
    w.results[child["id"]] = "child-done"
    w.ids["flow-done-child"] = child["id"]

    _push(client, w, "paused", PAUSED)
    client.ok({"cmd": "Pause", "queue": PAUSED})

    cron = client.ok({"cmd": "Cron", "name": CRON, "queue": CRON_QUEUE, "data": {"c": 1},
                      "schedule": CRON_SCHEDULE})
    w.cron_next_run = float(cron["cron"]["nextRun"])
    for role, job_id in w.ids.items():
        job = client.ok({"cmd": "GetJob", "id": job_id})["job"]
        w.jobs[role] = job
        w.states[role] = client.ok({"cmd": "GetState", "id": job_id})["state"]
    return w


def write(bun: Path, path: Path) -> Written:
    """Start the original on ``path``, drive it, stop it cleanly: the file is as the original left it."""
    ref = ReferenceProcess(bun, {"DATA_PATH": str(path), "RATE_LIMIT_MAX_REQUESTS": "1000000000"}).start()
    try:
        client = RawClient((HOST, ref.port))
        try:
            written = drive(client)
        finally:
            client.close()
    finally:
        ref.stop()
    return written


"""Pause, Resume and IsPaused in PostgreSQL mode: the memory engine's replies, and a pause that holds on
every broker of the namespace."""
from __future__ import annotations

import threading
import time

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.twins import Twins

pytestmark = pytest.mark.usefixtures("postgres")


def test_a_paused_queue_hands_out_nothing_until_resumed(twins: Twins) -> None:
    q = "qc-pause"
    assert twins.same({"cmd": "IsPaused", "queue": q}) == {"ok": True, "paused": False}
    twins.same({"cmd": "PUSHB", "queue": q, "jobs": [
        {"name": "a", "data": 1}, {"name": "b", "data": 2, "priority": 4}, {"name": "c", "data": 3, "delay": 60000},
    ]})
    assert twins.same({"cmd": "Pause", "queue": q}) == {"ok": True}
    assert twins.same({"cmd": "Pause", "queue": q}) == {"ok": True}
    assert twins.same({"cmd": "IsPaused", "queue": q}) == {"ok": True, "paused": True}
    assert twins.same({"cmd": "PULL", "queue": q, "owner": "w", "timeout": 0})["job"] is None
    assert twins.same({"cmd": "PULLB", "queue": q, "count": 5, "owner": "w"})["jobs"] == []
    twins.same({"cmd": "PUSH", "queue": q, "name": "d", "data": 4})
    assert twins.same({"cmd": "Resume", "queue": q}) == {"ok": True}
    assert twins.same({"cmd": "IsPaused", "queue": q}) == {"ok": True, "paused": False}
    pulled = twins.same({"cmd": "PULLB", "queue": q, "count": 5, "owner": "w"})
    assert [job["name"] for job in pulled["jobs"]] == ["b", "a", "d"]


def test_resume_of_a_queue_never_paused_and_bad_names_answer_as_in_memory(twins: Twins) -> None:
    assert twins.same({"cmd": "Resume", "queue": "qc-never"}) == {"ok": True}
    assert twins.same({"cmd": "IsPaused", "queue": "qc-never"}) == {"ok": True, "paused": False}
    refused = twins.same({"cmd": "Pause", "queue": 7})
    assert refused == {"ok": False, "error": "Queue name must be a string"}
    assert twins.same({"cmd": "IsPaused"})["ok"] is False


def test_a_pause_on_one_broker_stops_claims_on_another(brokers: tuple[RawClient, RawClient]) -> None:
    a, b = brokers
    a.ok({"cmd": "Pause", "queue": "qc-shared"})
    b.ok({"cmd": "PUSHB", "queue": "qc-shared", "jobs": [{"data": i} for i in range(3)]})
    assert b.ok({"cmd": "IsPaused", "queue": "qc-shared"})["paused"] is True
    assert b.ok({"cmd": "PULLB", "queue": "qc-shared", "count": 5, "owner": "w"})["jobs"] == []
    assert b.ok({"cmd": "PULL", "queue": "qc-shared", "owner": "w", "timeout": 300})["job"] is None


def test_a_resume_on_one_broker_wakes_a_long_poll_on_another(brokers: tuple[RawClient, RawClient]) -> None:
    a, b = brokers
    a.ok({"cmd": "Pause", "queue": "qc-wake"})
    a.ok({"cmd": "PUSH", "queue": "qc-wake", "data": 1})
    replies: list[dict[str, object]] = []
    started = time.monotonic()
    poll = threading.Thread(target=lambda: replies.append(
        b.ok({"cmd": "PULL", "queue": "qc-wake", "owner": "w", "timeout": 5000})))
    poll.start()
    time.sleep(0.3)
    a.ok({"cmd": "Resume", "queue": "qc-wake"})
    poll.join(6)
    assert replies and replies[0]["job"] is not None, replies
    # Woken by the resume, not by the end of the long-poll.
    assert time.monotonic() - started < 2.5

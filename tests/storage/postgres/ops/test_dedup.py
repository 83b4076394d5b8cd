"""Deduplication keys in PostgreSQL mode: GetDeduplicationJobId, RemoveDeduplicationKey and
RemoveJobDeduplicationKey answer as the memory engine does, and a released key can be taken again."""
from __future__ import annotations

import time

import pytest

from bunqueue._testbase.twins import Twins

pytestmark = pytest.mark.usefixtures("postgres")


def owner(twins: Twins, queue: str, key: object) -> object:
    return twins.same({"cmd": "GetDeduplicationJobId", "queue": queue, "deduplicationId": key})["data"]["jobId"]


def test_a_key_is_looked_up_released_and_taken_again(twins: Twins) -> None:
    q = "dd-keys"
    first = twins.same({"cmd": "PUSH", "queue": q, "name": "a", "data": 1, "uniqueKey": "K1"})
    assert owner(twins, q, "K1") == first["id"]
    assert owner(twins, q, "K2") is None
    assert owner(twins, "dd-other", "K1") is None
    assert owner(twins, q, 5) is None
    removed = {"cmd": "RemoveDeduplicationKey", "queue": q, "deduplicationId": "K1"}
    assert twins.same(removed) == {"ok": True, "data": {"count": 1}}
    assert twins.same(removed) == {"ok": True, "data": {"count": 0}}
    assert owner(twins, q, "K1") is None
    second = twins.same({"cmd": "PUSH", "queue": q, "name": "b", "data": 2, "uniqueKey": "K1"})
    assert second["id"] != first["id"]
    assert owner(twins, q, "K1") == second["id"]
    # The first job no longer names the key; the second does until its key is removed.
    assert twins.same({"cmd": "RemoveJobDeduplicationKey", "id": "$0"}) == {"ok": True, "data": {"removed": False}}
    assert twins.same({"cmd": "RemoveJobDeduplicationKey", "id": "$1"}) == {"ok": True, "data": {"removed": True}}
    assert twins.same({"cmd": "RemoveJobDeduplicationKey", "id": "$1"}) == {"ok": True, "data": {"removed": False}}
    for missing in ("nope", 12, None):
        assert twins.same({"cmd": "RemoveJobDeduplicationKey", "id": missing}) == {
            "ok": True, "data": {"removed": False}}
    third = twins.same({"cmd": "PUSH", "queue": q, "name": "c", "data": 3, "uniqueKey": "K1"})
    assert third["id"] not in (first["id"], second["id"])


def test_a_finished_owner_holds_no_key(twins: Twins) -> None:
    q = "dd-done"
    twins.same({"cmd": "PUSH", "queue": q, "data": 1, "uniqueKey": "K"})
    memory, postgres = twins.both({"cmd": "PULL", "queue": q, "owner": "w"})
    assert owner(twins, q, "K") is not None
    assert twins.memory.call({"cmd": "ACK", "id": memory["job"]["id"], "token": memory["token"]}) == {"ok": True}
    assert twins.postgres.call({"cmd": "ACK", "id": postgres["job"]["id"], "token": postgres["token"]}) == {"ok": True}
    assert owner(twins, q, "K") is None
    assert twins.same({"cmd": "RemoveJobDeduplicationKey", "id": "$0"}) == {"ok": True, "data": {"removed": False}}
    assert twins.same({"cmd": "RemoveDeduplicationKey", "queue": q, "deduplicationId": "K"})["data"] == {"count": 0}


def test_a_key_with_a_ttl_is_free_once_the_ttl_passes(twins: Twins) -> None:
    q = "dd-ttl"
    twins.same({"cmd": "PUSH", "queue": q, "data": 1, "uniqueKey": "T", "dedup": {"ttl": 300}})
    assert owner(twins, q, "T") is not None
    time.sleep(0.4)
    assert owner(twins, q, "T") is None
    assert twins.same({"cmd": "RemoveJobDeduplicationKey", "id": "$0"}) == {"ok": True, "data": {"removed": False}}


def test_keys_and_ids_no_job_can_hold_answer_as_unknown(twins: Twins) -> None:
    q = "dd-odd"
    twins.same({"cmd": "PUSH", "queue": q, "data": 1, "uniqueKey": "K"})
    for odd in ("\0", "K\0", 7, None, ["K"], {"K": 1}, True):
        assert owner(twins, q, odd) is None
        assert twins.same({"cmd": "RemoveDeduplicationKey", "queue": q, "deduplicationId": odd})["data"] == {"count": 0}
        assert twins.same({"cmd": "RemoveJobDeduplicationKey", "id": odd})["data"] == {"removed": False}
    assert owner(twins, q, "K") is not None

"""The event notifications between brokers, packed and read back: a batch's ids cross in a few entries and
come out as one event per id, in order, each notification under PostgreSQL's payload limit."""
from __future__ import annotations

import asyncio
import base64
from typing import Any

import msgpack

from bunqueue.storage.postgres.broadcast import IDS_PER_EVENT, MARK, NOTIFY_MANY, Broadcast

# PostgreSQL refuses a notification payload of 8000 bytes or more.
PAYLOAD_LIMIT = 8000


class RecordingPool:
    """Stands in for the pool's one statement here: the notifications as NOTIFY_MANY would send them."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.statements = 0

    async def execute(self, statement: str, payloads: list[str]) -> None:
        assert statement == NOTIFY_MANY
        self.sent.extend(payloads)
        self.statements += 1


async def _sent(events: list[tuple[str, Any]]) -> list[str]:
    pool = RecordingPool()
    sender = Broadcast(pool, "ns", "broker-a")  # type: ignore[arg-type]
    for kind, event in events:
        if kind == "one":
            sender.send(event)
        else:
            sender.send_many(*event)
    await sender.close()
    return pool.sent


async def test_events_that_come_within_the_window_share_one_statement() -> None:
    pool = RecordingPool()
    sender = Broadcast(pool, "ns", "broker-a", window_s=0.5)  # type: ignore[arg-type]
    for n in range(5):
        sender.send(("q", "pulled", f"job-{n}", 1.0, {}))
        await asyncio.sleep(0.001)
    await sender.close()
    assert pool.statements == 1
    assert [event[2] for event in _heard(pool.sent)] == [f"job-{n}" for n in range(5)]


def _heard(payloads: list[str]) -> list[tuple[Any, ...]]:
    reader = Broadcast(None, "ns", "broker-b")  # type: ignore[arg-type]
    heard: list[tuple[Any, ...]] = []
    for payload in payloads:
        events = reader.read(payload)
        assert events is not None
        heard.extend(events)
    return heard


async def test_a_batchs_ids_cross_in_few_entries_and_are_heard_one_event_each_in_order() -> None:
    ids = [f"0192f0c4-8c8a-7000-8000-{n:012x}" for n in range(300)]
    payloads = await _sent([
        ("one", ("q", "pulled", "before", 1.0, {})),
        ("many", ("q", "pushed", ids, 2.0)),
        ("one", ("q", "completed", "after", 3.0, {"data": {"r": 1}})),
    ])
    assert all(len(payload) < PAYLOAD_LIMIT for payload in payloads)
    entries = [entry for payload in payloads
               for entry in list(_unpacked(payload))[1:]]
    # 300 ids in three entries of at most IDS_PER_EVENT, between the two single events.
    assert [len(entry[2]) if isinstance(entry[2], list) else entry[2] for entry in entries] == [
        "before", IDS_PER_EVENT, IDS_PER_EVENT, 300 - 2 * IDS_PER_EVENT, "after"]
    heard = _heard(payloads)
    assert heard[0] == ("q", "pulled", "before", 1.0, {}, [])
    assert heard[1:-1] == [("q", "pushed", job_id, 2.0, {}, []) for job_id in ids]
    assert heard[-1] == ("q", "completed", "after", 3.0, {"data": {"r": 1}}, [])
    # Each heard event has fields of its own: filling one in (a left-out data read back) touches no other.
    heard[1][4]["data"] = "x"
    assert heard[2][4] == {}


async def test_the_sending_broker_ignores_its_own_batch_and_a_malformed_entry_is_ignored() -> None:
    payloads = await _sent([("many", ("q", "pushed", ["a", "b"], 2.0))])
    assert Broadcast(None, "ns", "broker-a").read(payloads[0]) is None  # type: ignore[arg-type]
    header = msgpack.packb(["ns", "broker-a"])
    for entry in (["q"], ["q", "pushed", ["a"]], 7):
        payload = MARK + base64.b64encode(header + msgpack.packb(entry)).decode("ascii")
        assert Broadcast(None, "ns", "broker-b").read(payload) is None  # type: ignore[arg-type]


def _unpacked(payload: str) -> msgpack.Unpacker:
    assert payload.startswith(MARK)
    unpacker = msgpack.Unpacker(raw=False)
    unpacker.feed(base64.b64decode(payload[1:]))
    return unpacker

"""The HTTP side's command runs: a health probe's command reuses one client while its replies come at once."""
from __future__ import annotations

from bunqueue.broker.facade import Broker
from bunqueue.server.http.listener import Commands
from bunqueue.server.runner import CommandRunner
from bunqueue.storage import MemoryStore


async def test_probes_answered_at_once_share_a_client_and_one_that_waits_keeps_its_own() -> None:
    commands = Commands(CommandRunner(Broker(), MemoryStore(), frozenset()))
    first = commands.prober
    status = commands.probe({"cmd": "StorageStatus"})
    assert status == {"ok": True, "data": {"diskFull": False, "error": None, "since": None}}
    assert commands.probe({"cmd": "StorageStatus"}) == status
    assert commands.prober is first
    # A reply that waits keeps the client it was asked with; the next probe gets another.
    waiting = commands.probe({"cmd": "PULL", "queue": "q", "timeout": 5000})
    assert not isinstance(waiting, dict)
    assert commands.prober is not first
    assert commands.probe({"cmd": "StorageStatus"}) == status
    pushed = commands.probe({"cmd": "PUSH", "queue": "q", "data": {"n": 1}})
    assert isinstance(pushed, dict) and pushed["ok"] is True
    reply = await waiting
    assert reply["ok"] is True and reply["job"].id == pushed["id"]

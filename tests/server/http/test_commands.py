"""The HTTP side's command runs: commands reuse one client while their replies come at once."""
from __future__ import annotations

from bunqueue.broker.facade import Broker
from bunqueue.server.http.listener import Commands
from bunqueue.server.runner import CommandRunner
from bunqueue.storage import MemoryStore


async def test_commands_answered_at_once_share_a_client_and_one_that_waits_keeps_its_own() -> None:
    commands = Commands(CommandRunner(Broker(), MemoryStore(), frozenset()))
    first = commands.client
    status = commands.now({"cmd": "StorageStatus"})
    assert status == {"ok": True, "data": {"diskFull": False, "error": None, "since": None}}
    assert commands.now({"cmd": "StorageStatus"}) == status
    assert commands.client is first
    # A reply that waits keeps the client it was asked with; the next command gets another.
    waiting = commands.now({"cmd": "PULL", "queue": "q", "timeout": 5000})
    assert not isinstance(waiting, dict)
    assert commands.client is not first
    assert commands.now({"cmd": "StorageStatus"}) == status
    pushed = commands.now({"cmd": "PUSH", "queue": "q", "data": {"n": 1}}, 40)
    assert commands.client.session.frame_size == 40
    assert isinstance(pushed, dict) and pushed["ok"] is True
    reply = await waiting
    assert reply["ok"] is True and reply["job"].id == pushed["id"]

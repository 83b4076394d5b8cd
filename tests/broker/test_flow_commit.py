"""PUSHF with a durable store: nothing of the graph is visible before its commit, its ids are taken
meanwhile, and a failed commit publishes nothing and leaves nothing to be written later."""
from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bunqueue._core.jobs import Job
from bunqueue._testbase.clock import T0, FakeClock
from bunqueue._testbase.inprocess import RecordingStore
from bunqueue.broker.facade import Broker
from bunqueue.broker.session import Session
from bunqueue.commands import HANDLERS
from bunqueue.errors import CommandError


class CommittingStore(RecordingStore):
    """A store whose graph commits resolve when the test says so."""

    def __init__(self) -> None:
        super().__init__()
        self.commits: list[asyncio.Future[str | None]] = []
        self.graphs: list[list[str]] = []

    def graph_added(self, jobs: list[Job]) -> asyncio.Future[str | None]:
        self.graphs.append([job.id for job in jobs])
        commit: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        self.commits.append(commit)
        return commit


def graph(parent: str, kid: str) -> dict[str, Any]:
    return {"cmd": "PUSHF", "jobs": [
        {"id": parent, "queue": "q", "input": {"name": "p", "data": {"__childrenIds": [kid]},
                                               "childrenIds": [kid], "dependsOn": [kid]}},
        {"id": kid, "queue": "c", "input": {"name": "k", "data": {"__parentId": parent, "__parentQueue": "q"},
                                            "parentId": parent}},
    ]}


class Client:
    def __init__(self) -> None:
        self.store = CommittingStore()
        self.broker = Broker(store=self.store, clock=FakeClock(T0))
        self.session = Session()

    def send(self, cmd: dict[str, Any]) -> Any:
        return HANDLERS[cmd["cmd"]](self.broker, cmd, self.session)

    def invisible(self, *ids: str) -> bool:
        return all(self.send({"cmd": "GetState", "id": job_id})["state"] == "unknown" for job_id in ids)


async def test_the_graph_is_published_only_after_its_commit() -> None:
    client = Client()
    task = asyncio.ensure_future(client.send(graph("P", "K")))
    await asyncio.sleep(0)
    assert client.store.graphs == [["P", "K"]]
    assert client.invisible("P", "K")
    assert client.send({"cmd": "PULL", "queue": "c"})["job"] is None
    assert client.send({"cmd": "GetJobCounts", "queue": "q"})["counts"]["waiting-children"] == 0
    with pytest.raises(CommandError, match="Flow job P already exists"):
        client.send(graph("P", "K2"))
    client.store.commits[0].set_result(None)
    reply = await task
    assert [job.id for job in reply["data"]["jobs"]] == ["P", "K"]
    assert client.send({"cmd": "GetState", "id": "P"})["state"] == "waiting-children"
    assert client.send({"cmd": "PULL", "queue": "c"})["job"].id == "K"


async def test_a_failed_commit_publishes_nothing() -> None:
    client = Client()
    task = asyncio.ensure_future(client.send(graph("P", "K")))
    await asyncio.sleep(0)
    client.store.take()
    client.store.commits[0].set_result("Storage write failed: database or disk is full")
    with pytest.raises(CommandError, match="Storage write failed: database or disk is full"):
        await task
    assert client.invisible("P", "K")
    # The rows the failed commit would retry are dropped, and the ids are free again.
    assert client.store.take() == [("job_removed", "P"), ("job_removed", "K")]
    again = asyncio.ensure_future(client.send(graph("P", "K")))
    await asyncio.sleep(0)
    client.store.commits[1].set_result(None)
    assert (await again)["ok"] is True

"""Flows across restarts of a SQLite server: a graph acknowledged by PUSHF is wholly there after a
kill -9, parents keep waiting for the children that have not completed, and children values and kept
failures survive."""
from __future__ import annotations

from pathlib import Path

import pytest

from bunqueue._testbase.frames import RawClient
from tests.reliability.test_restart import restart, start


def flow(parent: str, kids: list[str], **child_opts: object) -> dict[str, object]:
    jobs: list[dict[str, object]] = [{"id": parent, "queue": "fp", "input": {
        "name": "parent", "data": {"__childrenIds": kids}, "childrenIds": kids, "dependsOn": kids}}]
    for kid in kids:
        jobs.append({"id": kid, "queue": "fc", "input": {
            "name": kid, "data": {"__parentId": parent, "__parentQueue": "fp"}, "parentId": parent,
            "maxAttempts": 1, **child_opts}})
    return {"cmd": "PUSHF", "jobs": jobs}


def settle(c: RawClient, job_id: str, result: object = None, fail: bool = False) -> None:
    pulled = c.call({"cmd": "PULLB", "queue": "fc", "count": 10})
    assert job_id in [job["id"] for job in pulled["jobs"]]
    for job in pulled["jobs"]:
        if job["id"] == job_id:
            cmd = {"cmd": "FAIL", "id": job_id, "error": "boom"} if fail else {"cmd": "ACK", "id": job_id,
                                                                                 "result": result}
            assert c.call(cmd)["ok"]
        else:
            assert c.call({"cmd": "MoveToWait", "id": job["id"]})["ok"]


@pytest.mark.parametrize("kill", [False, True], ids=["sigterm", "sigkill"])
def test_a_graph_and_its_progress_survive_restarts(tmp_path: Path, kill: bool) -> None:
    data = tmp_path / "q.db"
    proc = start(data)
    try:
        c = RawClient(proc.addr)
        assert c.call(flow("P", ["A", "B", "C"]))["ok"]
        assert c.call(flow("IP", ["IA", "IB"], ignoreDependencyOnFailure=True))["ok"]
        c.close()
        proc = restart(proc, data, kill=kill)
        c = RawClient(proc.addr)
        states = {job_id: c.call({"cmd": "GetState", "id": job_id})["state"]
                  for job_id in ("P", "A", "B", "C", "IP", "IA", "IB")}
        assert states == {"P": "waiting-children", "A": "waiting", "B": "waiting", "C": "waiting",
                          "IP": "waiting-children", "IA": "waiting", "IB": "waiting"}
        settle(c, "A", {"a": 1})
        settle(c, "IA", fail=True)
        c.close()
        proc = restart(proc, data, kill=kill)
        c = RawClient(proc.addr)
        assert c.call({"cmd": "GetState", "id": "P"})["state"] == "waiting-children"
        assert c.call({"cmd": "GetChildrenValues", "id": "P"})["data"]["values"] == {"fc:A": {"a": 1}}
        assert c.call({"cmd": "GetIgnoredChildrenFailures", "id": "IP"})["values"] == {"fc:IA": "boom"}
        assert c.call({"cmd": "GetJob", "id": "IP"})["job"]["dependsOn"] == ["IB"]
        settle(c, "B", "b")
        assert c.call({"cmd": "GetState", "id": "P"})["state"] == "waiting-children"
        settle(c, "C", "c")
        assert c.call({"cmd": "GetState", "id": "P"})["state"] == "waiting"
        settle(c, "IB", "ib")
        assert c.call({"cmd": "GetState", "id": "IP"})["state"] == "waiting"
        assert c.call({"cmd": "GetChildrenValues", "id": "P"})["data"]["values"] == {
            "fc:A": {"a": 1}, "fc:B": "b", "fc:C": "c"}
        c.close()
    finally:
        proc.stop()


def test_a_refused_graph_leaves_nothing_on_disk(tmp_path: Path) -> None:
    data = tmp_path / "q.db"
    proc = start(data)
    try:
        c = RawClient(proc.addr)
        assert c.call(flow("P", ["A"]))["ok"]
        assert c.call(flow("P", ["A"])) == {"ok": False, "error": "Flow job P already exists"}
        bad = flow("Q", ["QA"])
        bad["jobs"][1]["input"]["data"] = {}  # type: ignore[index]
        assert c.call(bad)["ok"] is False
        c.close()
        proc = restart(proc, data, kill=True)
        c = RawClient(proc.addr)
        counts = c.call({"cmd": "GetJobCounts", "queue": "fp"})["counts"]
        assert counts["waiting-children"] == 1 and c.call({"cmd": "GetState", "id": "Q"})["state"] == "unknown"
        c.close()
    finally:
        proc.stop()

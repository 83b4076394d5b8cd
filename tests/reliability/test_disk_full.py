"""A full disk: writes fail with a clear error, nothing is acknowledged falsely, and service resumes."""
from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True, check=False)


def test_disk_full_is_reported_and_recovers(small_disk: Path) -> None:
    proc = ServerProcess(env={"BUNQUEUE_DATA_PATH": str(small_disk / "q.db"),
                              "RATE_LIMIT_MAX_REQUESTS": "0"}).start()
    try:
        c = RawClient(proc.addr, timeout=10)
        payload = "x" * 20_000
        failure = None
        accepted = 0
        for _ in range(400):
            reply = c.call({"cmd": "PUSH", "queue": "full", "name": "j", "data": payload, "durable": True})
            if not reply["ok"]:
                failure = reply["error"]
                break
            accepted += 1
        assert failure is not None, "the disk never filled"
        assert failure.startswith("Storage write failed:") and "full" in failure
        status = c.call({"cmd": "StorageStatus"})["data"]
        assert status["diskFull"] is True and status["since"] > 0 and "full" in status["error"]
        assert c.call({"cmd": "Ping"})["ok"], "the server keeps serving"

        subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
        deadline = time.monotonic() + 60
        while c.call({"cmd": "StorageStatus"})["data"]["diskFull"]:
            assert time.monotonic() < deadline, "the store never recovered"
            time.sleep(0.2)
        after = c.call({"cmd": "PUSH", "queue": "full", "name": "j", "data": 1, "durable": True})
        assert after["ok"]
        c.close()
    finally:
        proc.stop()
    restarted = ServerProcess(env={"BUNQUEUE_DATA_PATH": str(small_disk / "q.db")}).start()
    try:
        c = RawClient(restarted.addr)
        counts = c.call({"cmd": "GetJobCounts", "queue": "full"})["counts"]
        # The refused push is in memory too: it reached the disk once there was room, with the last one.
        assert counts["waiting"] == accepted + 2, "every job kept in memory reached the disk"
    finally:
        restarted.stop()


def test_a_pushf_graph_refused_by_a_full_disk_is_never_published(small_disk: Path) -> None:
    data = small_disk / "q.db"
    proc = ServerProcess(env={"BUNQUEUE_DATA_PATH": str(data), "RATE_LIMIT_MAX_REQUESTS": "0"}).start()
    payload = {"x": "x" * 20_000}

    def graph(parent: str) -> dict[str, object]:
        kids = [f"{parent}-{i}" for i in range(3)]
        return {"cmd": "PUSHF", "jobs": [
            {"id": parent, "queue": "fp", "input": {"name": "p", "data": {**payload, "__childrenIds": kids},
                                                    "childrenIds": kids, "dependsOn": kids}},
            *({"id": kid, "queue": "fc", "input": {"name": "k", "parentId": parent,
                                                   "data": {**payload, "__parentId": parent, "__parentQueue": "fp"}}}
              for kid in kids)]}

    refused = None
    try:
        c = RawClient(proc.addr, timeout=10)
        accepted = 0
        for n in range(100):
            reply = c.call(graph(f"g{n}"))
            if not reply["ok"]:
                refused = f"g{n}"
                assert reply["error"].startswith("Storage write failed:") and "full" in reply["error"], reply
                break
            accepted += 1
        assert refused is not None, "the disk never filled"
        assert c.call({"cmd": "GetState", "id": refused})["state"] == "unknown"
        assert c.call({"cmd": "GetState", "id": f"{refused}-0"})["state"] == "unknown"
        assert len(c.call({"cmd": "PULLB", "queue": "fc", "count": 1000})["jobs"]) == 3 * accepted
        # Its ids were released: the same graph again meets the full disk, not "already exists".
        assert c.call(graph(refused))["error"].startswith("Storage write failed:")
        subprocess.run(["mount", "-o", "remount,size=64m", str(small_disk)], check=True)
        deadline = time.monotonic() + 60
        while c.call({"cmd": "StorageStatus"})["data"]["diskFull"]:
            assert time.monotonic() < deadline, "the store never recovered"
            time.sleep(0.2)
        # Its ids are free again, and the retried writes did not bring the refused graph back.
        assert c.call(graph(f"{refused}-again"))["ok"]
        c.close()
    finally:
        proc.stop()
    restarted = ServerProcess(env={"BUNQUEUE_DATA_PATH": str(data)}).start()
    try:
        c = RawClient(restarted.addr)
        assert c.call({"cmd": "GetState", "id": refused})["state"] == "unknown"
        assert c.call({"cmd": "GetState", "id": f"{refused}-2"})["state"] == "unknown"
        assert c.call({"cmd": "GetState", "id": f"{refused}-again"})["state"] == "waiting-children"
        assert c.call({"cmd": "GetJobCounts", "queue": "fp"})["counts"]["waiting-children"] == accepted + 1
    finally:
        restarted.stop()

"""Switching from the Bun server: a data file the original itself wrote, read by this server.

The original (as installed for the compatibility tests) is started on a file and driven into every job
state; this server then starts on that file, or `bunqueue migrate` converts it offline.
"""
from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess
from tests.compat import bunfile

START_TIMEOUT = 30


@pytest.fixture(scope="module")
def original(bun: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, bunfile.Written]:
    """The original's file, written once; each test works on a copy."""
    path = tmp_path_factory.mktemp("bun") / "bunqueue.db"
    return path, bunfile.write(bun, path)


@pytest.fixture
def copied(original: tuple[Path, bunfile.Written], tmp_path: Path) -> Path:
    path = tmp_path / "bunqueue.db"
    shutil.copy2(original[0], path)
    return path


def _started(path: Path, log: Path) -> ServerProcess:
    with log.open("wb") as out:
        return ServerProcess(env={"DATA_PATH": str(path), "RATE_LIMIT_MAX_REQUESTS": "0"}, output=out).start()


@pytest.fixture
def ours(copied: Path, tmp_path: Path) -> Iterator[tuple[RawClient, Path]]:
    log = tmp_path / "server.log"
    proc = _started(copied, log)
    client = RawClient(proc.addr)
    yield client, log
    client.close()
    proc.stop()


def _check_converted(client: RawClient, written: bunfile.Written) -> None:
    """Every job, result, DLQ entry and queue control as the original left them."""
    for role, job_id in written.ids.items():
        job = client.ok({"cmd": "GetJob", "id": job_id})["job"]
        before = written.jobs[role]
        for key in ("id", "queue", "name", "data", "priority", "createdAt", "maxAttempts", "parentId",
                    "childrenIds", "dependsOn", "uniqueKey", "customId"):
            assert job[key] == before[key], (role, key)
        if role != "active":
            assert client.ok({"cmd": "GetState", "id": job_id})["state"] == written.states[role], role
    for role, result in written.results.items():
        assert client.ok({"cmd": "GetResult", "id": written.ids[role]})["result"] == result
    dlq = client.ok({"cmd": "Dlq", "queue": bunfile.FAILED})["jobs"]
    assert [job["id"] for job in dlq] == [written.ids["failed"]]
    assert dlq[0]["data"] == written.data["failed"]
    assert client.ok({"cmd": "IsPaused", "queue": bunfile.PAUSED})["paused"] is True
    assert client.ok({"cmd": "IsPaused", "queue": bunfile.MAIN})["paused"] is False
    assert client.ok({"cmd": "GetDlqConfig", "queue": bunfile.FAILED})["config"]["maxEntries"] == 321
    assert client.ok({"cmd": "GetStallConfig", "queue": bunfile.FAILED})["config"]["maxStalls"] == 4
    cron = client.ok({"cmd": "CronGet", "name": bunfile.CRON})["cron"]
    assert (cron["queue"], cron["schedule"], cron["nextRun"]) == (
        bunfile.CRON_QUEUE, bunfile.CRON_SCHEDULE, written.cron_next_run)


def test_a_start_on_the_original_file_keeps_every_job(
    ours: tuple[RawClient, Path], original: tuple[Path, bunfile.Written], copied: Path
) -> None:
    client, log = ours
    written = original[1]
    _check_converted(client, written)
    # The interrupted attempt of the active job is charged, as after any restart; its progress stays.
    active = client.ok({"cmd": "GetJob", "id": written.ids["active"]})["job"]
    assert (active["progress"], active["progressMessage"]) == (40, "halfway")
    limits = client.ok({"cmd": "GetQueueLimits", "queue": bunfile.MAIN})["data"]["limits"]
    assert (limits["rateLimit"], limits["concurrencyLimit"]) == ({"max": 500, "duration": 1000}, 7)
    backup = copied.with_name("bunqueue.db.bun-2.x.bak")
    assert backup.read_bytes() == original[0].read_bytes()
    assert f"the original is kept as {backup}" in log.read_text()


def test_waiting_jobs_come_in_priority_order_and_custom_ids_stay_idempotent(
    ours: tuple[RawClient, Path], original: tuple[Path, bunfile.Written]
) -> None:
    client, _ = ours
    written = original[1]
    again = client.ok({"cmd": "PUSH", "queue": bunfile.MAIN, "data": {}, "jobId": "order-42"})
    assert again["id"] == "order-42"
    keyed = client.ok({"cmd": "PUSH", "queue": bunfile.MAIN, "data": {}, "uniqueKey": "uk-mid"})
    assert keyed["id"] == "order-42"
    pulled = []
    for _ in written.pull_order:
        job = client.ok({"cmd": "PULL", "queue": bunfile.MAIN})["job"]
        pulled.append(job["id"])
        client.ok({"cmd": "ACK", "id": job["id"], "result": {"ok": job["id"]}})
    assert pulled == written.pull_order
    assert client.ok({"cmd": "GetState", "id": written.ids["high"]})["state"] == "completed"
    # The delayed job is still delayed, and the paused queue gives nothing.
    assert client.ok({"cmd": "PULL", "queue": bunfile.MAIN})["job"] is None
    assert client.ok({"cmd": "PULL", "queue": bunfile.PAUSED})["job"] is None


def test_the_flow_parent_runs_once_its_last_child_completes(
    ours: tuple[RawClient, Path], original: tuple[Path, bunfile.Written]
) -> None:
    client, _ = ours
    child = client.ok({"cmd": "PULL", "queue": bunfile.FLOW})["job"]
    assert child["id"] == "flow-child-2" and child["parentId"] == "flow-parent"
    client.ok({"cmd": "ACK", "id": child["id"], "result": 2})
    parent = client.ok({"cmd": "PULL", "queue": bunfile.FLOW})["job"]
    assert parent["id"] == "flow-parent"
    values = client.ok({"cmd": "GetChildrenValues", "id": "flow-parent"})["data"]["values"]
    assert values == {f"{bunfile.FLOW}:flow-child-1": "child-done", f"{bunfile.FLOW}:flow-child-2": 2}


@pytest.mark.parametrize("content", ["unknown", "corrupt"])
def test_a_file_that_cannot_be_converted_stops_the_start_and_stays(tmp_path: Path, content: str) -> None:
    path = tmp_path / "bunqueue.db"
    if content == "unknown":
        conn = sqlite3.connect(path)
        conn.execute("CREATE TABLE invoices (id INTEGER PRIMARY KEY, total REAL)")
        conn.commit()
        conn.close()
    else:
        path.write_bytes(b"not a database at all " * 100)
    before = path.read_bytes()
    done = subprocess.run(
        [sys.executable, "-m", "bunqueue", "start", "--tcp-port", "0", "--http-port", "0",
         "--data-path", str(path)],
        capture_output=True, text=True, timeout=START_TIMEOUT, check=False,
    )
    assert done.returncode == 1
    assert "cannot open the data file" in done.stderr and "left unchanged" in done.stderr
    assert "Traceback" not in done.stderr
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bunqueue.db"]


def test_migrate_converts_offline_and_prints_the_summary(
    original: tuple[Path, bunfile.Written], tmp_path: Path
) -> None:
    source, written = original
    before = source.read_bytes()
    target = tmp_path / "converted.db"
    done = subprocess.run(
        [sys.executable, "-m", "bunqueue", "migrate", "--from", str(source), "--to", str(target)],
        capture_output=True, text=True, timeout=START_TIMEOUT, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "converted 12/12 jobs" in done.stderr
    rows = dict(line.rsplit(None, 1) for line in done.stdout.splitlines()[4:] if line.strip())
    assert rows["jobs total"] == "12" and rows["dlq entries"] == "1" and rows["crons"] == "1"
    assert rows["jobs prioritized"] == "2" and rows["custom ids"] == "1"
    assert source.read_bytes() == before
    again = subprocess.run(
        [sys.executable, "-m", "bunqueue", "migrate", "--from", str(source), "--to", str(tmp_path / "j.db"),
         "--json"],
        capture_output=True, text=True, timeout=START_TIMEOUT, check=False,
    )
    summary = json.loads(again.stdout)
    assert summary["jobs"]["waiting-children"] == 1 and summary["results"] == 2 and summary["queues"] == 3
    proc = _started(target, tmp_path / "server.log")
    client = RawClient(proc.addr)
    try:
        _check_converted(client, written)
    finally:
        client.close()
        proc.stop()

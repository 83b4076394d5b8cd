"""S3 backups against a real S3-compatible server on loopback (moto's server): `bunqueue backup` now, list,
restore and status, retention of the newest backups, a restore that brings back every job, and the server's
scheduled backups with their Prometheus series and events."""
from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess, free_port
from bunqueue.backup import manager as backup_manager
from bunqueue.config import Settings
from bunqueue.server import app as server_app

boto3 = pytest.importorskip("boto3")
moto_server = pytest.importorskip("moto.server")

BUNQUEUE = Path(sys.executable).parent / "bunqueue"
BUCKET = "bq-backups"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    port = free_port()
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    yield f"http://127.0.0.1:{port}"
    server.stop()


@pytest.fixture
def bucket(s3_endpoint: str, request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    """A fresh bucket and the environment that names it."""
    name = f"{BUCKET}-{abs(hash(request.node.name)) % 10**8}"
    env = {
        "S3_ENDPOINT": s3_endpoint, "S3_BUCKET": name, "AWS_ACCESS_KEY_ID": "test-key",
        "AWS_SECRET_ACCESS_KEY": "test-secret", "S3_REGION": "us-east-1", "S3_BACKUP_PREFIX": "nightly/",
    }
    client = s3_client(env)
    client.create_bucket(Bucket=name)
    yield env
    for item in client.list_objects_v2(Bucket=name).get("Contents", []):
        client.delete_object(Bucket=name, Key=item["Key"])
    client.delete_bucket(Bucket=name)


def s3_client(env: dict[str, str]) -> Any:
    return boto3.client("s3", endpoint_url=env["S3_ENDPOINT"], region_name="us-east-1",
                        aws_access_key_id="test-key", aws_secret_access_key="test-secret")


def objects(env: dict[str, str]) -> list[str]:
    return sorted(item["Key"] for item in s3_client(env).list_objects_v2(Bucket=env["S3_BUCKET"]).get("Contents", []))


def backup(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BUNQUEUE), "backup", *args], capture_output=True, text=True, timeout=60,
                          check=False, env={"PATH": "/usr/bin:/bin", **env})


def backup_json(env: dict[str, str], *args: str) -> tuple[int, dict[str, Any]]:
    proc = backup(env, *args, "--json")
    return proc.returncode, json.loads(proc.stdout or proc.stderr)


def push(c: RawClient, queue: str, **opts: Any) -> str:
    reply = c.call({"cmd": "PUSH", "queue": queue, "name": "n", "data": {"q": queue}, "durable": True, **opts})
    assert reply["ok"], reply
    return reply["id"]


def finish(c: RawClient, queue: str, job_id: str, ok: bool) -> None:
    pulled = c.call({"cmd": "PULL", "queue": queue})
    assert pulled["job"]["id"] == job_id
    if ok:
        assert c.call({"cmd": "ACK", "id": job_id, "token": pulled.get("token"), "result": {"done": job_id}})["ok"]
    else:
        assert c.call({"cmd": "FAIL", "id": job_id, "token": pulled.get("token"), "error": "boom"})["ok"]


def picture(c: RawClient, ids: list[str], queues: list[str]) -> dict[str, Any]:
    """Everything a client can read of these jobs and queues."""
    return {
        "jobs": {i: c.call({"cmd": "GetJob", "id": i}) for i in ids},
        "states": {i: c.call({"cmd": "GetState", "id": i}) for i in ids},
        "results": {i: c.call({"cmd": "GetResult", "id": i}) for i in ids},
        "counts": {q: c.call({"cmd": "GetJobCounts", "queue": q}) for q in queues},
        "dlq": {q: c.call({"cmd": "Dlq", "queue": q}) for q in queues},
        "paused": {q: c.call({"cmd": "IsPaused", "queue": q}) for q in queues},
        "crons": c.call({"cmd": "CronList"}),
    }


def test_a_restore_brings_back_every_job(tmp_path: Path, bucket: dict[str, str]) -> None:
    data = tmp_path / "q.db"
    env = {**bucket, "BUNQUEUE_DATA_PATH": str(data)}
    proc = ServerProcess(env=env).start()
    try:
        c = RawClient(proc.addr)
        queues = ["bk-a", "bk-b"]
        waiting = push(c, "bk-a", jobId="order-7")
        delayed = push(c, "bk-a", delay=3_600_000)
        prioritized = push(c, "bk-a", priority=9)
        done = push(c, "bk-b")
        finish(c, "bk-b", done, True)
        dead = push(c, "bk-b", maxAttempts=1)
        finish(c, "bk-b", dead, False)
        parked = push(c, "bk-b", dependsOn=[delayed])
        assert c.call({"cmd": "Pause", "queue": "bk-b"})["ok"]
        assert c.call({"cmd": "Cron", "name": "nightly", "queue": "bk-a", "data": {},
                       "schedule": "0 3 * * *"})["ok"]
        ids = [waiting, delayed, prioritized, done, dead, parked]
        before = picture(c, ids, queues)
        # The file is live: the server keeps running while the backup reads it.
        status, made = backup_json(env, "now")
        assert status == 0 and made["success"] is True, made
        assert made["message"] == "Backup created successfully"
        key = made["data"]["key"]
        assert key.startswith("nightly/bunqueue-") and key.endswith(".db")
        assert objects(env) == sorted([key, f"{key}.meta.json"])
        later = push(c, "bk-a")
        c.close()
        assert proc.stop() == 0
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(f"{data}{suffix}"):
                os.remove(f"{data}{suffix}")
        refused = backup(env, "restore", key)
        assert refused.returncode == 1
        assert refused.stdout.startswith("Restore will OVERWRITE the current database. Use --force (-f)")
        assert not data.exists()
        status, restored = backup_json(env, "restore", key, "-f")
        assert status == 0 and restored["success"] is True, restored
        assert restored["message"] == "Restore completed successfully"
        assert restored["data"]["key"] == key
        proc = ServerProcess(env=env).start()
        c = RawClient(proc.addr)
        after = picture(c, ids, queues)
        for part in before:
            assert after[part] == before[part], part
        # Taken before the later push: the backup is the file as of its own moment.
        assert c.call({"cmd": "GetJob", "id": later}) == {"ok": False, "error": "Job not found"}
        c.close()
    finally:
        proc.stop()


def test_list_keeps_the_newest_and_status_reports(tmp_path: Path, bucket: dict[str, str]) -> None:
    data = tmp_path / "q.db"
    env = {**bucket, "BUNQUEUE_DATA_PATH": str(data), "S3_BACKUP_RETENTION": "2"}
    proc = ServerProcess(env=env).start()
    try:
        c = RawClient(proc.addr)
        push(c, "bk-list")
        keys = []
        for _ in range(3):
            status, made = backup_json(env, "create")
            assert status == 0, made
            keys.append(made["data"]["key"])
        status, listed = backup_json(env, "list")
        assert status == 0 and listed["message"] == "Found 2 backup(s)"
        assert [row["key"] for row in listed["data"]] == [keys[2], keys[1]]
        assert all(row["size"].endswith(" MB") and row["date"].endswith("Z") for row in listed["data"])
        assert objects(env) == sorted([keys[1], f"{keys[1]}.meta.json", keys[2], f"{keys[2]}.meta.json"])
        text = backup(env, "list")
        header, rule, *rows = text.stdout.splitlines()[1:]
        assert text.stdout.splitlines()[0] == "Found 2 backup(s)"
        assert header.split() == ["key", "size", "date"] and len(rows) == 2 and rows[0].startswith(keys[2])
        status, shown = backup_json(env, "status")
        assert status == 0 and shown == {"success": True, "message": "Backup configuration", "data": {
            "enabled": False, "bucket": env["S3_BUCKET"], "endpoint": env["S3_ENDPOINT"],
            "interval": "360 minutes", "retention": "2 backups"}}
        c.close()
    finally:
        proc.stop()


def test_refusals_in_the_originals_words(tmp_path: Path, bucket: dict[str, str]) -> None:
    env = {**bucket, "BUNQUEUE_DATA_PATH": str(tmp_path / "q.db")}
    no_path = {k: v for k, v in env.items() if k != "BUNQUEUE_DATA_PATH"}
    assert backup_json(no_path, "now") == (1, {
        "success": False, "message": "BUNQUEUE_DATA_PATH not set. Backup requires persistent storage."})
    no_bucket = {k: v for k, v in env.items() if k != "S3_BUCKET"}
    status, refused = backup_json(no_bucket, "list")
    assert (status, refused["message"]) == (1, "S3 configuration invalid:\n  - S3_BUCKET is required")
    status, refused = backup_json(env, "restore", "nightly/none.db", "--force")
    assert (status, refused["message"]) == (1, "Restore failed: Backup not found: nightly/none.db")
    unknown = backup(env, "sideways")
    assert unknown.returncode == 1
    assert unknown.stderr == "Error: Unknown backup subcommand: sideways. Use: now, create, list, restore, status\n"


def test_backups_on_without_sqlite_refuse_to_start() -> None:
    proc = ServerProcess(env={"S3_BACKUP_ENABLED": "true"})
    with pytest.raises(RuntimeError) as refused:
        proc.start(timeout=20)
    assert "server exited with 1" in str(refused.value)
    assert "S3 backup requires persistent SQLite storage. Set BUNQUEUE_DATA_PATH" in str(refused.value)


async def scrape(port: int) -> dict[str, float]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/prometheus") as r:
        body = await r.text()
    return {line.split()[0]: float(line.split()[1]) for line in body.splitlines()
            if line.startswith("bunqueue_backup_")}


async def wait_for(predicate: Any, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not await predicate():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def test_the_server_backs_up_on_schedule_with_metrics_and_events(
    tmp_path: Path, bucket: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(backup_manager, "FIRST_BACKUP_AFTER_S", 0.2)
    env = {**bucket, "BUNQUEUE_DATA_PATH": str(tmp_path / "q.db"), "S3_BACKUP_ENABLED": "true",
           "TCP_PORT": "0", "HTTP_PORT": str(free_port()), "HOST": "127.0.0.1"}
    server = server_app.BrokerServer(Settings.load(env=env))
    heard: list[tuple[str, dict[str, Any]]] = []
    server.broker.events.notices.append(lambda name, data: heard.append((name, data)))
    started = time.time()
    await server.start()
    try:
        assert server.http is not None
        port = server.http.port
        assert (await scrape(port))["bunqueue_backup_scheduler_running"] == 1.0

        async def succeeded() -> bool:
            return (await scrape(port))["bunqueue_backup_successes_total"] == 1.0

        await wait_for(succeeded)
        metrics = await scrape(port)
        assert metrics["bunqueue_backup_enabled"] == 1.0
        assert metrics["bunqueue_backup_attempts_total"] == 1.0
        assert metrics["bunqueue_backup_failures_total"] == 0.0
        assert metrics["bunqueue_backup_in_progress"] == 0.0
        assert metrics["bunqueue_backup_interval_seconds"] == 21600.0
        assert metrics["bunqueue_backup_retention"] == 7.0
        assert metrics["bunqueue_backup_last_success_timestamp_seconds"] >= started
        assert metrics["bunqueue_backup_last_size_bytes"] > 0
        assert metrics["bunqueue_backup_last_duration_seconds"] > 0
        keys = [k for k in objects(env) if k.endswith(".db")]
        assert len(keys) == 1
        assert heard == [("storage:backup-started", {"bucket": env["S3_BUCKET"]}),
                         ("storage:backup-completed", {"bucket": env["S3_BUCKET"], "key": keys[0]})]
    finally:
        await server.shutdown()


async def test_a_failed_backup_is_counted_and_announced(tmp_path: Path, bucket: dict[str, str]) -> None:
    env = {**bucket, "S3_BUCKET": "no-such-bucket", "BUNQUEUE_DATA_PATH": str(tmp_path / "q.db"),
           "TCP_PORT": "0", "HTTP_PORT": str(free_port()), "HOST": "127.0.0.1"}
    server = server_app.BrokerServer(Settings.load(env=env))
    heard: list[tuple[str, dict[str, Any]]] = []
    server.broker.events.notices.append(lambda name, data: heard.append((name, data)))
    await server.start()
    try:
        assert server.backups is not None and server.http is not None
        with pytest.raises(Exception, match="NoSuchBucket"):
            await server.backups.backup()
        metrics = await scrape(server.http.port)
        assert metrics["bunqueue_backup_enabled"] == 0.0
        assert metrics["bunqueue_backup_attempts_total"] == 1.0
        assert metrics["bunqueue_backup_failures_total"] == 1.0
        assert metrics["bunqueue_backup_consecutive_failures"] == 1.0
        assert metrics["bunqueue_backup_successes_total"] == 0.0
        assert metrics["bunqueue_backup_last_failure_timestamp_seconds"] > 0
        assert [name for name, _ in heard] == ["storage:backup-started", "storage:backup-failed"]
        assert "NoSuchBucket" in heard[1][1]["error"]
    finally:
        await server.shutdown()

"""``bunqueue start`` in PostgreSQL mode: the settings, the original's start-up refusals (one line, status 1,
no traceback), and, once every check passes, a broker that migrated the schema and serves."""
from __future__ import annotations

import os
import subprocess
import sys

import asyncpg
import pytest

from bunqueue._testbase.frames import RawClient
from bunqueue._testbase.server import ServerProcess, free_port
from bunqueue.config import (
    POSTGRES_URL_REQUIRED,
    POSTGRES_URL_SCHEME,
    POSTGRES_WITH_DATA_PATH,
    Settings,
    startup_error,
)
from bunqueue.storage.postgres.migrations import SCHEMA_VERSION


def _start(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BUNQUEUE_", "BQ_", "DATA_PATH", "SQLITE_"))}
    cmd = [
        sys.executable, "-m", "bunqueue", "start", "--host", "127.0.0.1",
        "--tcp-port", str(free_port()), "--http-port", str(free_port()), *args,
    ]
    return subprocess.run(cmd, env={**base, **env}, capture_output=True, text=True, timeout=60)


def _refused(proc: subprocess.CompletedProcess[str]) -> str:
    """The one error line of a start that stopped with status 1."""
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1, proc.stderr
    return errors[0].split("bunqueue: ", 1)[1]


def test_the_settings_take_the_originals_names_and_defaults() -> None:
    settings = Settings.load(env={"BUNQUEUE_POSTGRES_URL": "postgres://h/db"})
    assert settings.storage == "postgres"
    assert (settings.postgres_namespace, settings.broker_id, settings.postgres_pool_size) == ("default", None, 4)
    assert (settings.postgres_lease_duration_ms, settings.postgres_poll_interval_ms) == (30000, 250)
    assert (settings.postgres_statement_timeout_ms, settings.postgres_lock_timeout_ms) == (30000, 5000)
    assert settings.postgres_idle_transaction_timeout_ms == 30000
    loaded = Settings.load(env={
        "BUNQUEUE_STORAGE_DRIVER": "postgres", "BUNQUEUE_POSTGRES_URL": "postgresql://h/db",
        "BUNQUEUE_POSTGRES_NAMESPACE": "team-a", "BUNQUEUE_BROKER_ID": "b-1",
        "BUNQUEUE_POSTGRES_POOL_SIZE": "8", "BUNQUEUE_POSTGRES_LEASE_DURATION_MS": "5000",
        "BUNQUEUE_POSTGRES_POLL_INTERVAL_MS": "100", "BUNQUEUE_POSTGRES_STATEMENT_TIMEOUT_MS": "2000",
        "BUNQUEUE_POSTGRES_LOCK_TIMEOUT_MS": "1000", "BUNQUEUE_POSTGRES_IDLE_TRANSACTION_TIMEOUT_MS": "3000",
    })
    assert (loaded.postgres_namespace, loaded.broker_id, loaded.postgres_pool_size) == ("team-a", "b-1", 8)
    assert (loaded.postgres_lease_duration_ms, loaded.postgres_poll_interval_ms) == (5000, 100)
    assert (loaded.postgres_statement_timeout_ms, loaded.postgres_lock_timeout_ms) == (2000, 1000)
    assert loaded.postgres_idle_transaction_timeout_ms == 3000
    assert startup_error(loaded) is None
    # An explicit driver wins over the URL; without either, a data path still means SQLite.
    assert Settings.load(env={"BUNQUEUE_STORAGE_DRIVER": "memory", "BUNQUEUE_POSTGRES_URL": "postgres://h"}).storage \
        == "memory"
    assert Settings.load(env={"BUNQUEUE_DATA_PATH": "/tmp/x.db"}).storage == "sqlite"
    with pytest.raises(ValueError, match="must be memory, sqlite or postgres, got 'mysql'"):
        _ = Settings.load(env={"BUNQUEUE_STORAGE_DRIVER": "mysql"}).storage


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"BUNQUEUE_STORAGE_DRIVER": "postgres"}, POSTGRES_URL_REQUIRED),
        ({"BUNQUEUE_POSTGRES_URL": "postgres://127.0.0.1/db", "BUNQUEUE_DATA_PATH": "/tmp/q.db"},
         POSTGRES_WITH_DATA_PATH),
        ({"BUNQUEUE_POSTGRES_URL": "mysql://127.0.0.1/db"}, POSTGRES_URL_SCHEME),
        ({"BUNQUEUE_POSTGRES_URL": "postgres://127.0.0.1:notaport/db"}, POSTGRES_URL_SCHEME),
        ({"BUNQUEUE_POSTGRES_URL": "postgres://127.0.0.1/db", "BUNQUEUE_POSTGRES_POOL_SIZE": "0"},
         "BUNQUEUE_POSTGRES_POOL_SIZE must be at least 1, got 0"),
    ],
)
def test_a_bad_configuration_stops_the_start_in_the_originals_words(env: dict[str, str], message: str) -> None:
    assert _refused(_start(env)) == message


def test_an_unreachable_server_stops_the_start() -> None:
    port = free_port()  # nothing listens there
    proc = _start({"BUNQUEUE_POSTGRES_URL": f"postgres://u:secret@127.0.0.1:{port}/db"})
    line = _refused(proc)
    assert line.startswith(f"Failed to initialize storage: cannot connect to PostgreSQL at 127.0.0.1:{port}/db: ")
    assert "secret" not in proc.stderr


async def test_a_missing_database_stops_the_start(postgres_url: str) -> None:
    url = postgres_url.rsplit("/", 1)[0] + "/no_such_database"
    line = _refused(_start({"BUNQUEUE_POSTGRES_URL": url}))
    assert line.startswith("Failed to initialize storage: cannot connect to PostgreSQL at ")
    assert 'database "no_such_database" does not exist' in line


async def test_a_newer_schema_stops_the_start(postgres_url: str) -> None:
    conn = await asyncpg.connect(postgres_url)
    try:
        await conn.execute("CREATE TABLE bunqueue_schema_version (version integer PRIMARY KEY)")
        await conn.execute("INSERT INTO bunqueue_schema_version VALUES ($1)", SCHEMA_VERSION + 1)
    finally:
        await conn.close()
    line = _refused(_start({"BUNQUEUE_POSTGRES_URL": postgres_url}))
    assert line == (
        f"Failed to initialize storage: PostgreSQL schema version {SCHEMA_VERSION + 1} is newer than supported"
        f" version {SCHEMA_VERSION}; upgrade bunqueue or use another database"
    )


async def test_a_start_that_passes_every_check_migrates_and_serves(postgres_url: str) -> None:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BUNQUEUE_", "BQ_", "DATA_PATH", "SQLITE_"))}
    server = ServerProcess(env={**base, "BUNQUEUE_POSTGRES_URL": postgres_url, "BUNQUEUE_POSTGRES_NAMESPACE": "team-a"})
    server.start()
    try:
        client = RawClient(server.addr)
        pushed = client.call({"cmd": "PUSH", "queue": "q", "data": {"n": 1}})
        pulled = client.call({"cmd": "PULL", "queue": "q", "owner": "w"})
        assert pulled["job"]["id"] == pushed["id"]
        assert client.call({"cmd": "ACK", "id": pushed["id"], "token": pulled["token"]}) == {"ok": True}
        client.close()
    finally:
        assert server.stop() == 0
    conn = await asyncpg.connect(postgres_url)
    try:
        assert await conn.fetchval("SELECT max(version) FROM bunqueue_schema_version") == SCHEMA_VERSION
        assert await conn.fetchval("SELECT namespace FROM bunqueue_jobs") == "team-a"
    finally:
        await conn.close()

"""A port another process holds stops ``bunqueue start`` with one error line and exit status 1, as the
original's "Failed to start server"; never a traceback, and a data file opened before is closed again."""
from __future__ import annotations

import socket
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture
def taken_port() -> Iterator[int]:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    yield holder.getsockname()[1]
    holder.close()


@pytest.mark.parametrize("which", ["--tcp-port", "--http-port"])
def test_a_taken_port_stops_the_server_with_one_line(which: str, taken_port: int, tmp_path: Path) -> None:
    ports = {"--tcp-port": "0", "--http-port": "0", which: str(taken_port)}
    data = tmp_path / "jobs.db"
    proc = subprocess.run(
        [sys.executable, "-m", "bunqueue", "start", "--host", "127.0.0.1", "--data-path", str(data),
         *(word for pair in ports.items() for word in pair)],
        capture_output=True, text=True, timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "Failed to start server: " in errors[0], proc.stderr
    assert "address already in use" in errors[0] and str(taken_port) in errors[0], errors
    # The store was closed cleanly: the file opens, with its tables, and no write-ahead log is left over.
    with sqlite3.connect(data) as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    assert not (tmp_path / "jobs.db-wal").exists() or (tmp_path / "jobs.db-wal").stat().st_size == 0

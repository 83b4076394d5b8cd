"""The C load generator of the TCP benchmark rows (``benchmarks/tcpload.c``) against a real server: every job
it pushes or drains is verified exactly once, over an authenticated connection, and a refusal or a bad token
is a clear error rather than a hang."""
from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import tcpload
from benchmarks.workloads import WorkloadError, run_workload
from bunqueue import errors
from bunqueue._testbase.server import ServerProcess

TOKEN = "tcpload-token"


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    proc = ServerProcess(env={"AUTH_TOKENS": TOKEN, "RATE_LIMIT_MAX_REQUESTS": "1000000000"}).start()
    try:
        yield proc
    finally:
        proc.stop()


@pytest.mark.parametrize("name", sorted(tcpload.NATIVE_WORKLOADS))
def test_each_workload_verifies_every_job_exactly_once(server: ServerProcess, name: str) -> None:
    # 2,550 jobs: a PUSHB 1000 run ends with a partial batch, a PULLB 100 drain with a short one.
    row = asyncio.run(run_workload(name, server.addr, 2_550, token=TOKEN, client="c", timeout=60))
    assert row["verified"] and row["problems"] == [], row
    assert row["jobs"] == 2_550 and row["completed"] == 2_550 and row["rate"] > 0
    assert 0 <= row["client_cpu"]


def test_the_python_client_still_runs_the_same_rows(server: ServerProcess) -> None:
    row = asyncio.run(run_workload("worker", server.addr, 500, token=TOKEN, client="python", timeout=60))
    assert row["verified"] and row["completed"] == 500, row


def test_a_refused_command_ends_the_run_with_the_servers_words(server: ServerProcess) -> None:
    async def refused() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            template = tcpload._template(Path(tmp), "bad", {"cmd": "PUSHB", "queue": "", "jobs": [{"data": 1}]})
            await tcpload._generate(server.addr, "push", 1, 1, [f"{template}:3"], Path(tmp), TOKEN)

    with pytest.raises(WorkloadError) as caught:
        asyncio.run(refused())
    assert errors.QUEUE_REQUIRED in str(caught.value) and "3 refused" in str(caught.value)


def test_a_wrong_token_is_a_clear_error(server: ServerProcess) -> None:
    with pytest.raises(WorkloadError, match="Auth refused"):
        asyncio.run(run_workload("pushb100", server.addr, 100, token="wrong", client="c", timeout=30))

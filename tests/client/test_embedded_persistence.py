"""Embedded mode with a data path: what one process leaves, the next process that opens the path finds.

Both processes are real subprocesses with no server running; the first processes 50 jobs with an embedded
Worker, adds 7 more and exits; the second opens the same data path and sees the 7 waiting.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(120)

FIRST = """
import json, sys, threading
from bunqueue import Queue, Worker
path = sys.argv[1]
queue = Queue("persisted", embedded=True, data_path=path)
queue.add_bulk([{"name": "n", "data": {"n": n}} for n in range(50)])
done = threading.Event()
seen = []
def process(job):
    seen.append(job.data["n"])
    return job.data["n"] * 2
worker = Worker("persisted", process, concurrency=5, embedded=True, data_path=path)
worker.on("completed", lambda job, result: done.set() if len(seen) == 50 else None)
assert done.wait(30), len(seen)
assert worker.close(timeout=15)
later = [queue.add("later", {"i": i}).id for i in range(7)]
print(json.dumps({"processed": sorted(seen), "counts": queue.get_job_counts(), "later": later}))
"""

SECOND = """
import json, sys
from bunqueue import Queue
queue = Queue("persisted", embedded=True, data_path=sys.argv[1])
waiting = sorted(job.id for job in queue.get_waiting())
print(json.dumps({"counts": queue.get_job_counts(), "waiting": waiting, "result": queue.get_result(sys.argv[2])}))
"""


def _run(script: str, *args: str) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=60,
                         check=False, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def test_a_new_process_sees_what_the_last_one_left(tmp_path: Path) -> None:
    path = str(tmp_path / "jobs.db")
    first = _run(FIRST, path)
    assert first["processed"] == list(range(50))
    counts = first["counts"]
    assert isinstance(counts, dict) and counts["completed"] == 50 and counts["waiting"] == 7, counts
    later = first["later"]
    assert isinstance(later, list) and len(later) == 7

    second = _run(SECOND, path, later[0])
    counts = second["counts"]
    assert isinstance(counts, dict) and counts["waiting"] == 7 and counts["active"] == 0, counts
    assert counts["completed"] == 50, counts
    assert second["waiting"] == sorted(later)
    assert second["result"] is None

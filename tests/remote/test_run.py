"""The installed `bunqueue` command as a client of a real server: text tables, --json, exit status."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bunqueue._testbase.server import ServerProcess, free_port

BUNQUEUE = Path(sys.executable).parent / "bunqueue"


def run(server: ServerProcess | None, *words: str, port: int | None = None) -> subprocess.CompletedProcess[str]:
    target = ["-H", "127.0.0.1", "-p", str(port if port is not None else server.port)] if (server or port) else []
    return subprocess.run([str(BUNQUEUE), *words, *target], capture_output=True, text=True, timeout=30,
                          check=False, env={"PATH": "/usr/bin:/bin"})


def run_json(server: ServerProcess, *words: str) -> dict[str, Any]:
    proc = run(server, *words, "--json")
    assert proc.returncode == 0, proc.stderr
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def test_push_then_pull_then_ack_round_trip(server: ServerProcess) -> None:
    pushed = run_json(server, "push", "cli-rt", '{"to": "x"}', "--priority", "3")
    assert pushed["ok"] is True and isinstance(pushed["id"], str)
    text = run(server, "queue", "jobs", "cli-rt")
    assert text.returncode == 0
    header, rule, row = text.stdout.splitlines()
    assert header.split() == ["id", "name", "state", "priority", "attempts", "created"]
    assert set(rule.replace(" ", "")) == {"-"}
    assert row.split()[:4] == [pushed["id"], "default", "prioritized", "3"]

    pulled = run_json(server, "pull", "cli-rt", "-t", "1000")
    assert pulled["job"]["id"] == pushed["id"] and pulled["job"]["data"] == {"to": "x"}
    acked = run(server, "ack", pushed["id"], "--result", '{"sent": true}')
    assert acked.returncode == 0, acked.stderr
    assert run_json(server, "job", "result", pushed["id"])["result"] == {"sent": True}
    state = run(server, "job", "state", pushed["id"])
    assert state.returncode == 0 and "state: completed" in state.stdout.splitlines()


def test_global_options_are_accepted_before_or_after_the_command(server: ServerProcess) -> None:
    before = subprocess.run([str(BUNQUEUE), "--json", "-H", "127.0.0.1", "-p", str(server.port), "push",
                             "cli-order", "1"], capture_output=True, text=True, timeout=30, check=False)
    after = subprocess.run([str(BUNQUEUE), "push", "cli-order", "2", "--json", "-H", "127.0.0.1",
                            "--port", str(server.port)], capture_output=True, text=True, timeout=30, check=False)
    assert before.returncode == after.returncode == 0, (before.stderr, after.stderr)
    ids = {json.loads(before.stdout)["id"], json.loads(after.stdout)["id"]}
    assert len(ids) == 2
    assert run_json(server, "queue", "count", "cli-order")["count"] == 2


def test_queue_list_and_pause_are_readable(server: ServerProcess) -> None:
    run_json(server, "push", "cli-list", "{}")
    listed = run(server, "queue", "list")
    assert "cli-list" in listed.stdout.splitlines()
    assert run(server, "queue", "pause", "cli-list").returncode == 0
    assert run_json(server, "queue", "paused", "cli-list")["paused"] is True
    assert run(server, "queue", "paused", "cli-list").stdout.split() == ["paused:", "yes"]


def test_error_reply_exits_1_with_the_servers_words(server: ServerProcess) -> None:
    proc = run(server, "job", "get", "no-such-job", "--json")
    assert proc.returncode == 1 and proc.stdout == ""
    assert json.loads(proc.stderr) == {"ok": False, "error": "Job not found"}
    text = run(server, "job", "get", "no-such-job")
    assert text.returncode == 1 and text.stderr.strip() == "error: Job not found"


def test_usage_errors_exit_2_and_send_nothing(server: ServerProcess) -> None:
    for words, message in (
        (("push",), "push: missing <queue>"),
        (("push", "q", "{bad"), "data must be valid JSON"),
        (("push", "q", "1", "--bogus"), "push: unknown option --bogus"),
        (("job", "progress", "x", "150"), "progress must be a number from 0 to 100"),
        (("queue", "frobnicate"), "queue: unknown or missing subcommand 'frobnicate'"),
        (("cron", "add", "nightly", "--queue", "q", "--data", "{}"), "needs --schedule"),
    ):
        proc = run(server, *words)
        assert proc.returncode == 2 and message in proc.stderr, (words, proc.stderr)


def test_unreachable_server_is_a_clear_message_not_a_traceback() -> None:
    proc = run(None, "ping", port=free_port())
    assert proc.returncode == 1
    assert proc.stderr.startswith("error: cannot reach the server at 127.0.0.1:")
    assert "Traceback" not in proc.stderr


def test_auth_token_from_flag_or_environment() -> None:
    server = ServerProcess(env={"AUTH_TOKENS": "s3cret"}).start()
    try:
        refused = run(server, "ping")
        assert refused.returncode == 1 and "error:" in refused.stderr
        assert run(server, "ping", "--token", "s3cret").returncode == 0
        env_run = subprocess.run([str(BUNQUEUE), "ping", "-p", str(server.port), "-H", "127.0.0.1"],
                                 capture_output=True, text=True, timeout=30, check=False,
                                 env={"PATH": "/usr/bin:/bin", "BQ_TOKEN": "s3cret"})
        assert env_run.returncode == 0, env_run.stderr
        wrong = run(server, "ping", "-t", "nope", "--json")
        assert wrong.returncode == 1 and json.loads(wrong.stderr)["ok"] is False
    finally:
        server.stop()


def test_health_and_doctor_report_checks_and_dead_letters() -> None:
    server = ServerProcess().start()
    try:
        health = run_json(server, "health")
        assert health["ok"] is True and health["hello"]["version"]
        assert [c["check"] for c in health["checks"]] == ["server reachable", "storage writable"]
        assert run(server, "doctor").returncode == 0

        job_id = run_json(server, "push", "cli-dlq", '{"n": 1}', "--max-attempts", "1")["id"]
        assert run_json(server, "pull", "cli-dlq")["job"]["id"] == job_id
        assert run(server, "fail", job_id, "--error", "boom").returncode == 0
        listed = run(server, "dlq", "list", "cli-dlq").stdout.splitlines()
        assert listed[0].split() == ["id", "name", "attempts", "stalls", "created", "data"]
        assert listed[2].split()[:3] == [job_id, "default", "1/1"]
        doctor = run(server, "doctor")
        assert doctor.returncode == 1
        assert "FAIL  dead letters: 1 in 1 queue(s)" in doctor.stdout.splitlines()
        assert "ok    versions match: " in doctor.stdout
        version = run(server, "version")
        assert version.returncode == 0 and version.stdout.startswith("client: bunqueue ")
    finally:
        server.stop()


@pytest.mark.parametrize("words", [("--version",), ("version",)])
def test_version_without_a_server_still_answers(words: tuple[str, ...]) -> None:
    proc = run(None, *words, port=free_port())
    assert proc.returncode == 0 and "bunqueue" in proc.stdout

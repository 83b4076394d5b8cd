"""The side-by-side benchmark harness runs end to end against our server (no Bun, no speed checks)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
# The default workload set of benchmarks.load and benchmarks.http_load, spelled out so the test needs no
# import path setup.
WORKLOADS = {"push", "pushb100", "pushb1000", "pullb_ackb", "worker", "grouped_worker", "latency", "pushf100",
             "http_push", "http_health"}


def test_quick_compare_of_ours_reports_every_workload_verified(tmp_path: Path) -> None:
    out = tmp_path / "compare.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.compare", "--quick", "--only", "ours", "--modes", "memory",
         "--json", "--no-chart", "--out", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=90, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert json.loads(out.read_text())["summary"] == doc["summary"]
    assert doc["plan"]["servers"] == ["ours"] and doc["plan"]["modes"] == ["memory"]
    assert doc["machine"]["nproc"] >= 1 and doc["machine"]["cpu_model"]

    rates = {r["workload"]: r for r in doc["summary"] if r["metric"] == "rate"}
    assert set(rates) == WORKLOADS
    for name, row in rates.items():
        ours = row["ours"]
        assert ours["status"] == "ok" and ours["verified"] is True, (name, ours)
        assert ours["median"] > 0, name
        assert row["bun"]["status"] == "not run" and row["ratio"] is None

    (run,) = doc["runs"]
    assert run["available"] and run["peak_rss_kib"] > 0
    for row in run["workloads"]:
        assert row["verified"] and not row["problems"] and row["rate"] > 0, row
        assert row["server_cpu_s"] >= 0
    latency = next(r for r in run["workloads"] if r["workload"] == "latency")
    assert 0 < latency["p50_us"] <= latency["p99_us"] <= latency["p999_us"]


def test_grouped_worker_reports_how_evenly_the_groups_were_served(tmp_path: Path) -> None:
    # 20 jobs per group: with the quick run's 2 per group, replies of 50 concurrent pulls arriving out of
    # claim order can end the measured span before every group was seen, whatever the server does.
    out = tmp_path / "grouped.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.compare", "--quick", "--only", "ours", "--modes", "memory",
         "--workloads", "grouped_worker", "--jobs", "20000", "--warmup", "0", "--json", "--no-chart",
         "--out", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=180, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    (run,) = json.loads(proc.stdout)["runs"]
    (grouped,) = run["workloads"]
    assert grouped["verified"] and grouped["groups"] == 1000, grouped
    assert 0 < grouped["fair_min"] <= 1 <= grouped["fair_max"], grouped


def test_recovery_benchmark_runs_small() -> None:
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.recovery", "--jobs", "2000"],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "recovered 2000 jobs" in result.stdout, result.stdout


def test_cron_benchmark_runs_small() -> None:
    import re
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    result = subprocess.run(
        [sys.executable, "-m", "benchmarks.cron", "--idle", "200", "--seconds", "1", "--due", "20"],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert re.search(r"idle: 200 crons, server CPU [\d.]+ s over", result.stdout), result.stdout
    found = re.search(r"lateness: 20 crons due at one second: p50 (-?\d+) ms, p99 (-?\d+) ms", result.stdout)
    assert found is not None, result.stdout
    assert 0 <= int(found[1]) <= int(found[2])


def test_webhook_and_counting_benchmarks_run_small() -> None:
    root = REPO_ROOT
    hooks = subprocess.run(
        [sys.executable, "-m", "benchmarks.webhooks", "--jobs", "200", "--hooks", "2", "--rounds", "1"],
        cwd=root, capture_output=True, text=True, timeout=300, check=False,
    )
    assert hooks.returncode == 0, hooks.stdout + hooks.stderr
    assert "deliveries 400/400 (success 400, failure 0, dropped 0)" in hooks.stdout, hooks.stdout
    assert "deliveries lost: 0" in hooks.stdout
    counting = subprocess.run(
        [sys.executable, "-m", "benchmarks.counting", "--jobs", "200", "--runs", "1"],
        cwd=root, capture_output=True, text=True, timeout=120, check=False,
    )
    assert counting.returncode == 0, counting.stderr
    assert "ns/job with the counters" in counting.stdout


def _synthetic_run(server: str, rate: float, rss_kib: int) -> dict[str, object]:
    row = {"workload": "pushb100", "verified": True, "rate": rate, "cpu_s_per_1k": 1000 / rate, "jobs": 1000}
    return {"round": 1, "mode": "memory", "server": server, "available": True,
            "workloads": [row], "peak_rss_kib": rss_kib}


def test_baseline_column_is_a_before_after_ratio_oriented_like_the_others() -> None:
    from benchmarks.compare.cli import make_plan, parse_args
    from benchmarks.compare.report import format_table, summarise

    plan = make_plan(parse_args(["--quick", "--baseline", "HEAD", "--modes", "memory",
                                 "--workloads", "pushb100"]))
    assert plan.servers == ("ours", "bun", "base")
    runs = [_synthetic_run("ours", 200.0, 1024), _synthetic_run("bun", 100.0, 4096),
            _synthetic_run("base", 250.0, 512)]
    rows = {r["measure"]: r for r in summarise(runs, plan)}
    assert rows["pushb100"]["ratio"] == 2.0 and rows["pushb100"]["vs_base"] == 0.8
    # Lower is better for CPU and memory: the baseline's smaller RSS and CPU make "vs base" below 1.
    assert rows["peak RSS"]["vs_base"] == 0.5 and rows["cpu pushb100"]["vs_base"] == 0.8
    table = format_table(list(rows.values()))
    assert "base (median)" in table.splitlines()[0] and "0.80" in table


def test_baseline_that_is_not_a_commit_is_a_clear_error() -> None:
    import pytest

    from benchmarks.compare.baseline import ensure_baseline
    from benchmarks.compare.install import InstallError

    with pytest.raises(InstallError, match="not a commit"):
        ensure_baseline("no-such-revision-here")


def test_baseline_with_a_setuptools_too_old_for_the_metadata_is_a_clear_error(monkeypatch, tmp_path: Path) -> None:
    import pytest

    from benchmarks.compare import baseline
    from benchmarks.compare.install import InstallError

    monkeypatch.setattr(baseline.metadata, "version", lambda name: "65.5.0")
    with pytest.raises(InstallError, match=r"setuptools, which must be 77 or newer: pip install -e '\.\[bench\]'"):
        baseline.ensure_baseline("HEAD", cache=tmp_path)
    assert not any(tmp_path.rglob("setup.py")), "nothing is exported before the tools are known to build it"


def test_ceiling_runs_the_null_server_on_the_tcp_workloads_and_verifies_them(tmp_path: Path) -> None:
    out = tmp_path / "ceiling.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.compare", "--quick", "--only", "ours", "--ceiling",
         "--modes", "memory,sqlite", "--workloads", "pushb100", "pullb_ackb", "worker", "http_health",
         "--json", "--no-chart", "--out", str(out)],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["plan"]["servers"] == ["ours", "null"]
    null_runs = {run["mode"]: run for run in doc["runs"] if run["server"] == "null"}
    assert null_runs["sqlite"]["available"] is False and "memory mode only" in null_runs["sqlite"]["reason"]
    # The null server answered every TCP workload, verified as a broker's answers are; HTTP is not its.
    memory = null_runs["memory"]
    assert memory["info"]["server"] == "nullserver"
    assert [row["workload"] for row in memory["workloads"]] == ["pushb100", "pullb_ackb", "worker"]
    assert all(row["verified"] and row["rate"] > 0 for row in memory["workloads"]), memory["workloads"]
    rates = {(r["mode"], r["workload"]): r for r in doc["summary"] if r["metric"] == "rate"}
    pushes = rates[("memory", "pushb100")]
    assert pushes["null"]["status"] == "ok"
    assert pushes["vs_ceiling"] == pushes["ours"]["median"] / pushes["null"]["median"]
    assert rates[("memory", "http_health")]["null"]["status"] == "not run"
    assert rates[("sqlite", "pushb100")]["null"]["status"] == "not available"


def test_the_null_servers_pulled_jobs_have_the_fields_ours_sends() -> None:
    import msgpack

    from benchmarks.nullserver import NullBroker, pack_reply

    broker = NullBroker()
    ids = broker.answer({"cmd": "PUSHB", "queue": "q", "jobs": [{"name": "a", "data": {"n": 1}}, {"data": 2}]})["ids"]
    reply = msgpack.unpackb(pack_reply(broker.answer({"cmd": "PULLB", "queue": "q", "count": 5, "owner": "w"})))
    assert [job["id"] for job in reply["jobs"]] == ids and len(reply["tokens"]) == 2
    assert [(job["name"], job["data"], job["queue"]) for job in reply["jobs"]] == [("a", {"n": 1}, "q"),
                                                                                  ("default", 2, "q")]
    from bunqueue._core.jobfactory import JobFactory

    # The same keys as a job of ours on the wire, so replies weigh what a broker's weigh.
    assert set(reply["jobs"][0]) == set(JobFactory().build({"name": "a", "data": 1}, "q", 1.0, False).to_dict())
    counts = broker.answer({"cmd": "GetJobCounts", "queue": "q"})["counts"]
    assert (counts["waiting"], counts["active"]) == (0, 2)
    broker.answer({"cmd": "ACKB", "ids": ids})
    assert broker.answer({"cmd": "GetJobCounts", "queue": "q"})["counts"]["completed"] == 2

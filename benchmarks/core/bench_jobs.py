"""JobFactory.build, the per-job push path, against the plain-Python baseline of the same rules.

Both sides validate the options and build the wire dict; the equivalence tests below run first so a
faster baseline that skipped a rule could not pass unnoticed.
"""
from __future__ import annotations

from typing import Any

import pytest
from baselines import PyJobFactory

from bunqueue._core.jobfactory import JobFactory
from bunqueue.errors import CommandError

FACTORIES = {"compiled": JobFactory, "baseline": PyJobFactory}
IMPLS = pytest.mark.parametrize("impl", ["compiled", "baseline"])
NOW = 1_800_000_000_000.0
BATCH = 1000

PLAIN = {"name": "email", "data": {"to": "user@example.com", "n": 1}}
# What a typical producer sets: the Bun client's default options plus a few per-job ones.
COMMON = {
    "name": "email",
    "data": {"to": "user@example.com", "n": 1},
    "priority": 5,
    "delay": 0,
    "maxAttempts": 5,
    "backoff": {"type": "exponential", "delay": 2000, "maxDelay": 60000},
    "timeout": 30000,
    "removeOnComplete": True,
    "tags": ["a", "b"],
    "customId": "order-1",
}
EVERYTHING = {
    **COMMON,
    "groupId": "tenant-1",
    "groupMaxSize": 100,
    "ttl": 60000,
    "stallTimeout": 5000,
    "timestamp": NOW - 1000,
    "stackTraceLimit": 20,
    "uniqueKey": "u-1",
    "dependsOn": ["x", "y"],
    "lifo": True,
    "repeat": {"every": 1000, "limit": 3},
    "dedup": {"ttl": 1000, "extend": True},
    "keepLogs": 10,
    "parentId": "p",
}
LEGACY = {"data": {"name": "legacy", "payload": 1}}
INVALID = [
    {"name": ""},
    {"name": "n", "priority": "high"},
    {"name": "n", "delay": float("inf")},
    {"name": "n", "backoff": {"maxDelay": -1}},
    {"name": "n", "groupId": "g", "priority": 1.5},
    {"name": "n", "repeat": {"every": 1, "pattern": "* * * * *"}},
    {"name": "n", "lifo": 1},
    {"name": "n", "tags": ["a", 1]},
    {"name": "n", "dedup": []},
    {"name": "n", "groupMaxSize": 0},
]
ATTRS = ("queue", "priority", "run_at", "lifo", "group_id", "group_max_size", "unique_key", "custom_id",
         "pending_deps")


def wire_of(job: Any) -> dict[str, Any]:
    """The job's wire form as a dict, whether the record keeps one or builds it on demand."""
    to_dict = getattr(job, "to_dict", None)
    return to_dict() if to_dict is not None else dict(job.wire)


def _comparable(job: Any) -> dict[str, Any]:
    # Generated ids differ between two factories; everything else must match, number types included
    # (an int and a float pack differently on the wire). Tuples and lists both pack as arrays.
    wire = wire_of(job)
    keys = list(wire)
    if job.custom_id is None:
        wire.pop("id")
    typed = {k: (list, list(v)) if isinstance(v, tuple) else (type(v), v) for k, v in wire.items()}
    return {"wire": typed, "keys": keys, **{a: getattr(job, a) for a in ATTRS}}


@pytest.mark.parametrize("opts", [PLAIN, COMMON, EVERYTHING, LEGACY, {"name": "n"}], ids=repr)
@pytest.mark.parametrize("batch", [False, True])
def test_baseline_builds_the_same_job(opts: dict[str, Any], batch: bool) -> None:
    compiled = JobFactory().build(dict(opts), "q", NOW, batch)
    baseline = PyJobFactory().build(dict(opts), "q", NOW, batch)
    assert _comparable(baseline) == _comparable(compiled)


@pytest.mark.parametrize("opts", INVALID, ids=repr)
def test_baseline_rejects_the_same_way(opts: dict[str, Any]) -> None:
    with pytest.raises(CommandError) as compiled:
        JobFactory().build(opts, "q", NOW, False)
    with pytest.raises(CommandError) as baseline:
        PyJobFactory().build(opts, "q", NOW, False)
    assert str(baseline.value) == str(compiled.value)


def _build_all(impl: str, batch_opts: list[dict[str, Any]]) -> list[Any]:
    build = FACTORIES[impl]().build
    return [build(opts, "q", NOW, True) for opts in batch_opts]


@IMPLS
@pytest.mark.benchmark(group="jobs: build a PUSHB of 1000 plain jobs")
def test_build_plain_batch(benchmark, impl):
    jobs = benchmark(_build_all, impl, [PLAIN] * BATCH)
    assert len(jobs) == BATCH


@IMPLS
@pytest.mark.benchmark(group="jobs: build a PUSHB of 1000 jobs with common options")
def test_build_common_batch(benchmark, impl):
    # Distinct custom ids, as a producer would send; a shared one would only test the id field.
    batch_opts = [{**COMMON, "customId": f"order-{i}"} for i in range(BATCH)]
    jobs = benchmark(_build_all, impl, batch_opts)
    assert jobs[-1].id == f"order-{BATCH - 1}"


@IMPLS
@pytest.mark.benchmark(group="jobs: build one job with every option")
def test_build_everything(benchmark, impl):
    build = FACTORIES[impl]().build
    job = benchmark(build, EVERYTHING, "q", NOW, False)
    assert job.lifo and job.pending_deps == {"x", "y"}


@IMPLS
@pytest.mark.benchmark(group="jobs: reject 1000 invalid jobs")
def test_reject_invalid(benchmark, impl):
    build = FACTORIES[impl]().build
    batch_opts = INVALID * (BATCH // len(INVALID))

    def run() -> int:
        rejected = 0
        for opts in batch_opts:
            try:
                build(opts, "q", NOW, True)
            except CommandError:
                rejected += 1
        return rejected

    assert benchmark(run) == len(batch_opts)

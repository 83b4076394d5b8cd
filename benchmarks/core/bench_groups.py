"""GroupScheduler against a pure-Python twin: a heapq per lane and a deque rotation."""
from __future__ import annotations

import heapq
import random
from collections import deque

import pytest

from bunqueue._core.groups import GroupClaim, GroupScheduler


class PyGroupScheduler:
    """The same claims with the standard library: lanes of (priority, seq, id) heaps, a deque of groups,
    active counts in a dict (concurrency default only)."""

    def __init__(self) -> None:
        self.lanes: dict[str, list[tuple[float, int, str]]] = {}
        self.rotation: deque[str] = deque()
        self.active: dict[str, int] = {}

    def add(self, job_id: str, group_id: str, priority: float, seq: int) -> None:
        lane = self.lanes.get(group_id)
        if lane is None:
            lane = self.lanes[group_id] = []
            self.rotation.append(group_id)
        heapq.heappush(lane, (priority, seq, job_id))

    def claim(self, now: float, claim: GroupClaim | None = None) -> str | None:
        limit = claim.concurrency if claim is not None else 0
        rotation = self.rotation
        for _ in range(len(rotation)):
            group = rotation[0]
            rotation.rotate(-1)
            active = self.active.get(group, 0)
            if limit and active >= limit:
                continue
            lane = self.lanes[group]
            job_id = heapq.heappop(lane)[2]
            self.active[group] = active + 1
            if not lane:
                del self.lanes[group]
                rotation.remove(group)
            return job_id
        return None

    def release(self, group_id: str, now: float) -> bool:
        self.active[group_id] -= 1
        return group_id in self.lanes


SCHEDULERS = {"compiled": GroupScheduler, "baseline": PyGroupScheduler}
IMPLS = pytest.mark.parametrize("impl", ["compiled", "baseline"])


def workload(n: int, n_groups: int, seed: int = 5) -> list[tuple[str, str, float, int]]:
    rng = random.Random(seed)
    return [(f"job-{i}", f"g{rng.randrange(n_groups)}", float(rng.randrange(4)), i) for i in range(n)]


JOBS = workload(100_000, 1000)


def fill_then_drain(scheduler_type, jobs, claim):
    groups = scheduler_type()
    add = groups.add
    for job_id, group, priority, seq in jobs:
        add(job_id, group, priority, seq)
    take = groups.claim
    release = groups.release
    taken = 0
    while True:
        job_id = take(0.0, claim)
        if job_id is None:
            break
        release(jobs[int(job_id[4:])][1], 0.0)
        taken += 1
    return taken


@IMPLS
@pytest.mark.benchmark(group="groups: 100k jobs in 1000 groups, add all, claim + release all")
def test_fill_drain(benchmark, impl):
    assert benchmark.pedantic(fill_then_drain, (SCHEDULERS[impl], JOBS, None), rounds=3) == len(JOBS)


@IMPLS
@pytest.mark.benchmark(group="groups: same, pulls carrying group.concurrency 1")
def test_fill_drain_concurrency(benchmark, impl):
    claim = GroupClaim(concurrency=1)
    assert benchmark.pedantic(fill_then_drain, (SCHEDULERS[impl], JOBS, claim), rounds=3) == len(JOBS)

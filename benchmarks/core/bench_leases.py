"""LeaseTable against the dict-plus-heapq baseline."""
from __future__ import annotations

import itertools

import pytest
from baselines import PyLeaseTable

from bunqueue._core.leases import LeaseTable

TABLES = {"compiled": LeaseTable, "baseline": PyLeaseTable}
IMPLS = pytest.mark.parametrize("impl", ["compiled", "baseline"])
IDS = [f"job-{i}" for i in range(100_000)]


@IMPLS
@pytest.mark.benchmark(group="leases: heartbeat round, renew 10k leases")
def test_renew_round(benchmark, impl):
    table = TABLES[impl]()
    for job_id in IDS[:10_000]:
        table.grant(job_id, "token", None, 0.0, 30_000.0)
    clock = itertools.count(1)

    def run():
        now = float(next(clock))
        renew = table.renew
        for job_id in IDS[:10_000]:
            renew(job_id, now)

    benchmark(run)
    assert len(table) == 10_000


@IMPLS
@pytest.mark.benchmark(group="leases: grant 100k, release 50k, pop_expired rest")
def test_grant_release_expire(benchmark, impl):
    def run():
        table = TABLES[impl]()
        grant = table.grant
        for i, job_id in enumerate(IDS):
            grant(job_id, "token", None, float(i), 30_000.0)
        for job_id in IDS[::2]:
            table.release(job_id)
        return table.pop_expired(1e12)

    assert len(benchmark.pedantic(run, rounds=5)) == 50_000

"""LeaseTable: grants, renewals, expiry order, and a stateful comparison with a dict-and-sort model."""
from __future__ import annotations

import math
import tracemalloc

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from bunqueue._core.leases import LeaseTable


def test_empty_table():
    table = LeaseTable()
    assert len(table) == 0
    assert "a" not in table
    assert table.token("a") is None
    assert table.owner("a") is None
    assert table.expires_at("a") is None
    assert table.ttl("a") is None
    assert table.renewals("a") == 0
    assert not table.renew("a", 0.0)
    assert not table.release("a")
    assert table.pop_expired(math.inf) == []
    assert table.next_deadline() is None


def test_grant_and_read_back():
    owner = object()
    table = LeaseTable()
    table.grant("a", "tok", owner, 1000.0, 30000.0)
    assert "a" in table and len(table) == 1
    assert table.token("a") == "tok"
    assert table.owner("a") is owner
    assert table.expires_at("a") == 31000.0
    assert table.ttl("a") == 30000.0
    assert table.renewals("a") == 0
    assert table.next_deadline() == 31000.0


def test_grant_replaces_existing_lease():
    table = LeaseTable()
    table.grant("a", "old", "w1", 0.0, 10.0)
    table.renew("a", 5.0)
    table.grant("a", "new", None, 100.0, 50.0)
    assert len(table) == 1
    assert (table.token("a"), table.owner("a"), table.expires_at("a")) == ("new", None, 150.0)
    assert table.renewals("a") == 0
    assert table.pop_expired(149.0) == []
    assert table.pop_expired(150.0) == ["a"]


def test_renew_uses_own_ttl_or_the_given_one():
    table = LeaseTable()
    table.grant("a", "t", None, 0.0, 10.0)
    assert table.renew("a", 5.0)
    assert table.expires_at("a") == 15.0
    assert table.renew("a", 6.0, 100.0)
    assert (table.expires_at("a"), table.ttl("a"), table.renewals("a")) == (106.0, 100.0, 2)
    assert table.renew("a", 7.0)
    assert table.expires_at("a") == 107.0


def test_ttl_not_positive_expires_now():
    table = LeaseTable()
    table.grant("a", "t", None, 10.0, 30.0)
    assert table.renew("a", 20.0, 0.0)
    assert table.expires_at("a") == 20.0
    table.grant("b", "t", None, 20.0, -5.0)
    assert table.expires_at("b") == 20.0 and table.ttl("b") == 0.0
    assert table.pop_expired(19.9) == []
    assert table.pop_expired(20.0) == ["a", "b"]


def test_release():
    table = LeaseTable()
    table.grant("a", "t", None, 0.0, 10.0)
    table.grant("b", "t", None, 0.0, 20.0)
    assert table.release("a")
    assert not table.release("a")
    assert table.token("a") is None
    assert table.next_deadline() == 20.0
    assert table.pop_expired(100.0) == ["b"]
    assert len(table) == 0


def test_pop_expired_earliest_first_ties_in_grant_order():
    table = LeaseTable()
    table.grant("c", "t", None, 0.0, 30.0)
    table.grant("a", "t", None, 0.0, 10.0)
    table.grant("b", "t", None, 5.0, 5.0)
    table.grant("d", "t", None, 0.0, 10.0)
    assert table.pop_expired(10.0) == ["a", "b", "d"]
    assert table.pop_expired(10.0) == []
    assert table.next_deadline() == 30.0
    assert table.pop_expired(30.0) == ["c"]


def test_renewed_lease_is_not_expired_by_its_old_deadline():
    table = LeaseTable()
    table.grant("a", "t", None, 0.0, 10.0)
    table.renew("a", 9.0)
    assert table.pop_expired(10.0) == []
    assert table.next_deadline() == 19.0


def test_regrant_after_release_reuses_nothing_stale():
    table = LeaseTable()
    table.grant("a", "t1", None, 0.0, 10.0)
    table.release("a")
    table.grant("b", "t2", None, 0.0, 50.0)
    assert table.pop_expired(10.0) == []
    assert table.pop_expired(50.0) == ["b"]


def test_invalid_times_are_refused():
    table = LeaseTable()
    with pytest.raises(ValueError):
        table.grant("a", "t", None, math.nan, 1.0)
    with pytest.raises(ValueError):
        table.grant("a", "t", None, math.inf, 1.0)
    with pytest.raises(ValueError):
        table.grant("a", "t", None, 0.0, math.nan)
    assert len(table) == 0
    table.grant("a", "t", None, 0.0, 10.0)
    with pytest.raises(ValueError):
        table.renew("a", 0.0, math.nan)
    with pytest.raises(TypeError):
        table.renew("a", 0.0, "10")
    assert table.expires_at("a") == 10.0 and table.renewals("a") == 0
    with pytest.raises(TypeError):
        table.grant("b", None, None, 0.0, 1.0)


def test_infinite_ttl_never_expires_before_infinity():
    table = LeaseTable()
    table.grant("a", "t", None, 0.0, math.inf)
    assert table.pop_expired(1e300) == []
    assert table.pop_expired(math.inf) == ["a"]


def test_stale_heap_entries_are_compacted():
    table = LeaseTable()
    for i in range(100):
        table.grant(f"j{i}", "t", None, 0.0, 10.0)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for now in range(20000):
            table.renew(f"j{now % 100}", float(now))
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # Without compaction the heap would hold 20,100 entries (~480 KB).
    assert grown < 64 * 1024
    assert len(table) == 100


IDS = st.sampled_from([f"job-{i}" for i in range(12)])
TIMES = st.integers(0, 60).map(float)
TTLS = st.sampled_from([-5.0, 0.0, 1.0, 5.0, 10.0, 30.0, math.inf])
OWNERS = st.sampled_from([None, "worker-1", "worker-2"])


class LeaseMachine(RuleBasedStateMachine):
    """Each lease in the model remembers when it was last stamped, to order equal expiries."""

    def __init__(self):
        super().__init__()
        self.table = LeaseTable()
        self.model: dict[str, dict] = {}
        self.stamps = 0

    def stamp(self) -> int:
        self.stamps += 1
        return self.stamps

    @rule(job_id=IDS, token=st.sampled_from(["t1", "t2"]), owner=OWNERS, now=TIMES, ttl=TTLS)
    def grant(self, job_id, token, owner, now, ttl):
        self.table.grant(job_id, token, owner, now, ttl)
        ttl = max(ttl, 0.0)
        self.model[job_id] = dict(
            token=token, owner=owner, expires_at=now + ttl, ttl=ttl, renewals=0, stamp=self.stamp()
        )

    @rule(job_id=IDS, now=TIMES, ttl=st.one_of(st.none(), TTLS))
    def renew(self, job_id, now, ttl):
        assert self.table.renew(job_id, now, ttl) == (job_id in self.model)
        lease = self.model.get(job_id)
        if lease is not None:
            if ttl is not None:
                lease["ttl"] = max(ttl, 0.0)
            lease["expires_at"] = now + lease["ttl"]
            lease["renewals"] += 1
            lease["stamp"] = self.stamp()

    @rule(job_id=IDS)
    def release(self, job_id):
        assert self.table.release(job_id) == (job_id in self.model)
        self.model.pop(job_id, None)

    @rule(now=TIMES)
    def pop_expired(self, now):
        due = [job_id for job_id, lease in self.model.items() if lease["expires_at"] <= now]
        due.sort(key=lambda job_id: (self.model[job_id]["expires_at"], self.model[job_id]["stamp"]))
        assert self.table.pop_expired(now) == due
        for job_id in due:
            del self.model[job_id]

    @invariant()
    def agrees_with_model(self):
        assert len(self.table) == len(self.model)
        deadlines = [lease["expires_at"] for lease in self.model.values()]
        assert self.table.next_deadline() == (min(deadlines) if deadlines else None)
        for job_id in [f"job-{i}" for i in range(12)]:
            lease = self.model.get(job_id)
            assert (job_id in self.table) == (lease is not None)
            if lease is None:
                assert self.table.token(job_id) is None and self.table.expires_at(job_id) is None
                continue
            assert self.table.token(job_id) == lease["token"]
            assert self.table.owner(job_id) == lease["owner"]
            assert self.table.expires_at(job_id) == lease["expires_at"]
            assert self.table.ttl(job_id) == lease["ttl"]
            assert self.table.renewals(job_id) == lease["renewals"]


LeaseMachine.TestCase.settings = settings(max_examples=120, stateful_step_count=50, deadline=None)
TestLeaseModel = LeaseMachine.TestCase

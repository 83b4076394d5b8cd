"""GroupScheduler: lane order, round-robin, limits, counters, and a stateful comparison with a model."""
from __future__ import annotations

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from bunqueue._core.groups import NO_LANE, NO_WINDOW_TTL, ONE_LANE, GroupClaim, GroupScheduler


def drain(groups: GroupScheduler, now: float = 0.0, claim: GroupClaim | None = None) -> list[str]:
    out = []
    while (job_id := groups.claim(now, claim)) is not None:
        out.append(job_id)
    return out


def test_empty_scheduler():
    groups = GroupScheduler()
    assert len(groups) == 0
    assert groups.claim(0.0) is None
    assert groups.retry_at == 0.0
    assert groups.depth("A") == 0
    assert groups.active_count("A") == 0
    assert groups.rotation() == []
    assert groups.lane_count == 0


def test_lower_priority_first_then_admission_order():
    groups = GroupScheduler()
    groups.add("p3", "A", 3, 1)
    groups.add("p0", "A", 0, 2)
    groups.add("p1", "A", 1, 3)
    groups.add("p0b", "A", 0, 4)
    assert drain(groups) == ["p0", "p0b", "p1", "p3"]


def test_round_robin_from_the_cursor_as_the_reference_orders_it():
    groups = GroupScheduler()
    for i, (job_id, group, priority) in enumerate(
        [("A-p3", "A", 3), ("A-p0", "A", 0), ("A-p1", "A", 1), ("A-p0b", "A", 0), ("B-p2", "B", 2)]
    ):
        groups.add(job_id, group, priority, i)
    assert groups.claim(0.0) == "A-p0"
    assert drain(groups) == ["B-p2", "A-p0b", "A-p1", "A-p3"]


def test_a_new_lane_waits_behind_the_lanes_already_waiting():
    groups = GroupScheduler()
    groups.add("a1", "A", 0, 1)
    groups.add("a2", "A", 0, 2)
    groups.add("b1", "B", 0, 3)
    assert groups.claim(0.0) == "a1"
    groups.add("c1", "C", 0, 4)
    assert groups.rotation() == ["B", "A", "C"]
    assert drain(groups) == ["b1", "a2", "c1"]


def test_counts_cover_ready_and_delayed_not_active():
    groups = GroupScheduler()
    groups.add_delayed("A")
    groups.add("w", "A", 0, 1)
    groups.add("w2", "A", 4, 2)
    assert groups.depth("A") == 3 and len(groups) == 3 and groups.ready_count == 2
    assert groups.claim(0.0) == "w"
    assert groups.depth("A") == 2 and groups.active_count("A") == 1
    groups.promote("d", "A", 0, 3)
    assert groups.depth("A") == 2 and groups.ready_count == 2
    assert groups.release("A", 0.0) is True
    assert groups.active_count("A") == 0


def test_remove_and_idle_lanes_are_dropped():
    groups = GroupScheduler()
    groups.add("a", "A", 0, 1)
    assert groups.remove("a", "A", 0.0) is True
    assert groups.remove("a", "A", 0.0) is False
    assert groups.lane_count == 0 and groups.rotation() == []
    groups.add_delayed("B")
    assert groups.remove_delayed("B", 5.0) is True
    assert groups.remove_delayed("B", 5.0) is False
    assert groups.lane_count == 0


def test_pause_blocks_new_claims_only():
    groups = GroupScheduler()
    groups.add("a1", "A", 0, 1)
    groups.add("a2", "A", 0, 2)
    groups.add("b1", "B", 0, 3)
    assert groups.claim(0.0) == "a1"
    assert groups.pause("A") is True and groups.pause("A") is False
    assert groups.is_paused("A")
    assert drain(groups) == ["b1"]
    assert groups.retry_at == 0.0
    assert groups.active_count("A") == 1
    assert groups.resume("A", 0.0) is True and groups.resume("A", 0.0) is False
    assert drain(groups) == ["a2"]


def test_concurrency_applies_only_with_a_claim_default_and_the_override_replaces_it():
    groups = GroupScheduler()
    for i, job_id in enumerate(["a1", "a2", "a3"]):
        groups.add(job_id, "A", 0, i)
    groups.set_concurrency("A", 1)
    with_default = GroupClaim(concurrency=5)
    assert drain(groups, 0.0, with_default) == ["a1"]
    assert groups.retry_at == 0.0
    assert groups.claim(0.0) == "a2"
    assert groups.remove_concurrency("A", 0.0) is True
    assert groups.remove_concurrency("A", 0.0) is False
    assert groups.concurrency("A") is None
    assert drain(groups, 0.0, with_default) == ["a3"]
    assert groups.active_count("A") == 3


def test_rate_window_opens_at_the_first_claim_and_names_its_end():
    groups = GroupScheduler()
    for i in range(5):
        groups.add(f"a{i}", "A", 0, i)
    limited = GroupClaim(limit_max=2, limit_duration=1000)
    assert drain(groups, 100.0, limited) == ["a0", "a1"]
    assert groups.retry_at == 1100.0
    assert groups.rate_limit_ttl("A", 600.0) == 500.0
    assert groups.rate_limit_ttl("A", 600.0, 3) == 0.0
    assert drain(groups, 1100.0, limited) == ["a2", "a3"]
    groups.set_rate_limit("A", 1, 50)
    assert groups.rate_limit("A") == (1, 50)
    assert drain(groups, 1100.0, limited) == ["a4"]
    assert groups.remove_rate_limit("A", 1200.0) is True
    assert groups.rate_limit("A") is None


def test_rate_limit_ttl_without_a_window():
    groups = GroupScheduler()
    assert groups.rate_limit_ttl("G", 0.0) == NO_WINDOW_TTL
    groups.set_rate_limit("G", 2, 1000)
    assert groups.rate_limit_ttl("G", 0.0) == NO_WINDOW_TTL


def test_manual_deadline_blocks_every_claim_until_it_passes():
    groups = GroupScheduler()
    groups.add("a", "A", 0, 1)
    groups.limit_until("A", 5000.0)
    assert groups.claim(0.0) is None
    assert groups.retry_at == 5000.0
    assert groups.rate_limit_ttl("A", 1000.0) == 4000.0
    assert groups.claim(5000.0) == "a"


def test_affinity_one_lane_or_none():
    groups = GroupScheduler()
    groups.add("a", "A", 0, 1)
    groups.add("b", "B", 0, 2)
    assert groups.claim(0.0, GroupClaim(lanes=NO_LANE)) is None
    assert groups.claim(0.0, GroupClaim(lanes=ONE_LANE, affinity="B")) == "b"
    assert groups.claim(0.0, GroupClaim(lanes=ONE_LANE, affinity="B")) is None
    assert groups.claim(0.0, GroupClaim(lanes=ONE_LANE, affinity="X")) is None
    assert groups.claim(0.0) == "a"


def test_claim_validation():
    with pytest.raises(ValueError):
        GroupClaim(limit_max=1)
    with pytest.raises(ValueError):
        GroupClaim(lanes=ONE_LANE)
    with pytest.raises(ValueError):
        GroupClaim(concurrency=-1)


def test_unclaim_gives_back_the_slot_and_the_window_claim():
    groups = GroupScheduler()
    groups.add("a1", "A", 0, 1)
    groups.add("a2", "A", 0, 2)
    claim = GroupClaim(concurrency=1, limit_max=1, limit_duration=1000)
    assert groups.claim(0.0, claim) == "a1"
    groups.unclaim("A", 0.0)
    assert groups.active_count("A") == 0
    assert groups.claim(0.0, claim) == "a2"


def test_controls_round_trip_and_clear_keeps_them():
    groups = GroupScheduler()
    groups.restore_controls("A", 3, 10, 1000, True)
    assert groups.controls("A") == (3, 10, 1000, True)
    assert groups.controlled_groups() == ["A"]
    groups.add("a", "A", 0, 1)
    groups.add_delayed("A")
    groups.clear(0.0)
    assert len(groups) == 0 and groups.ready_count == 0 and groups.rotation() == []
    assert groups.controls("A") == (3, 10, 1000, True)
    groups.forget_controls(0.0)
    assert groups.controls("A") is None and groups.lane_count == 0


def test_a_live_window_keeps_its_lane_after_the_group_empties():
    groups = GroupScheduler()
    groups.add("a1", "A", 0, 1)
    claim = GroupClaim(limit_max=1, limit_duration=1000)
    assert groups.claim(0.0, claim) == "a1"
    assert groups.release("A", 10.0) is False
    groups.add("a2", "A", 0, 2)
    assert groups.claim(20.0, claim) is None
    assert groups.retry_at == 1000.0


# -- model test ---------------------------------------------------------------------------------------

GROUPS = st.sampled_from(["A", "B", "C", "D"])
PRIORITIES = st.integers(0, 3)
TIMES = st.integers(0, 40)


class Model:
    """Lists and dicts, in the most literal form of the rules."""

    def __init__(self) -> None:
        self.lanes: dict[str, list[tuple[int, int, str]]] = {}
        self.rotation: list[str] = []  # index 0 is the cursor
        self.delayed: dict[str, int] = {}
        self.active: dict[str, int] = {}
        self.paused: set[str] = set()
        self.concurrency: dict[str, int] = {}
        self.rate: dict[str, tuple[int, int]] = {}
        self.manual: dict[str, int] = {}
        self.windows: dict[str, list[int]] = {}  # group -> [start, count, max, duration]

    def add(self, job_id: str, group: str, priority: int, seq: int) -> None:
        self.lanes.setdefault(group, []).append((priority, seq, job_id))
        if group not in self.rotation:
            self.rotation.append(group)

    def blocked_until(self, group: str, now: int, claim: GroupClaim) -> int:
        if group in self.paused:
            return -1
        until = self.manual.get(group)
        if until is not None:
            if now < until:
                return until
            del self.manual[group]
        if claim.concurrency:
            if self.active.get(group, 0) >= self.concurrency.get(group, claim.concurrency):
                return -1
        window = self.windows.get(group)
        if not claim.limit_max or window is None:
            return 0
        limit = self.rate.get(group, (claim.limit_max, claim.limit_duration))
        start, count, wmax, wdur = window
        if now >= start + wdur or (wmax, wdur) != limit:
            del self.windows[group]
            return 0
        return start + wdur if count >= limit[0] else 0

    def claim(self, now: int, claim: GroupClaim) -> tuple[str | None, int]:
        if claim.lanes == NO_LANE:
            return None, 0
        if claim.lanes == ONE_LANE:
            order = [claim.affinity] if claim.affinity in self.rotation else []
        else:
            order = list(self.rotation)
        retry = 0
        for group in order:
            until = self.blocked_until(group, now, claim)
            if until == 0:
                return self.take(group, now, claim), 0
            if until > 0 and (retry == 0 or until < retry):
                retry = until
        return None, retry

    def take(self, group: str, now: int, claim: GroupClaim) -> str:
        lane = self.lanes[group]
        best = min(lane)
        lane.remove(best)
        self.active[group] = self.active.get(group, 0) + 1
        if claim.limit_max:
            if group not in self.windows:
                wmax, wdur = self.rate.get(group, (claim.limit_max, claim.limit_duration))
                self.windows[group] = [now, 0, wmax, wdur]
            self.windows[group][1] += 1
        i = self.rotation.index(group)
        self.rotation = self.rotation[i + 1:] + self.rotation[: i + 1]
        if not lane:
            self.rotation.remove(group)
            del self.lanes[group]
        return best[2]


CLAIMS = st.builds(
    GroupClaim,
    concurrency=st.sampled_from([0, 1, 2]),
    limit_max=st.just(0),
    limit_duration=st.just(0),
) | st.builds(
    lambda m, d, c: GroupClaim(concurrency=c, limit_max=m, limit_duration=d),
    st.integers(1, 3), st.sampled_from([5, 10]), st.sampled_from([0, 2]),
) | st.builds(lambda g: GroupClaim(lanes=ONE_LANE, affinity=g), GROUPS) | st.just(GroupClaim(lanes=NO_LANE))


class GroupSchedulerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.groups = GroupScheduler()
        self.model = Model()
        self.seq = 0
        self.now = 0

    @rule(group=GROUPS, priority=PRIORITIES)
    def add(self, group, priority):
        self.seq += 1
        job_id = f"j{self.seq}"
        self.groups.add(job_id, group, priority, self.seq)
        self.model.add(job_id, group, priority, self.seq)

    @rule(group=GROUPS)
    def add_delayed(self, group):
        self.groups.add_delayed(group)
        self.model.delayed[group] = self.model.delayed.get(group, 0) + 1

    @rule(group=GROUPS, priority=PRIORITIES)
    def promote(self, group, priority):
        if not self.model.delayed.get(group):
            return
        self.seq += 1
        self.groups.promote(f"j{self.seq}", group, priority, self.seq)
        self.model.delayed[group] -= 1
        self.model.add(f"j{self.seq}", group, priority, self.seq)

    @rule(step=TIMES, claim=CLAIMS)
    def claim(self, step, claim):
        self.now += step
        expected, retry = self.model.claim(self.now, claim)
        assert self.groups.claim(float(self.now), claim) == expected
        if expected is None:
            assert self.groups.retry_at == retry

    @rule(group=GROUPS)
    def release(self, group):
        had = self.model.active.get(group, 0)
        released = self.groups.release(group, float(self.now))
        if had:
            self.model.active[group] = had - 1
            assert released == (group in self.model.rotation)
        else:
            assert released is False

    @rule(data=st.data())
    def remove(self, data):
        ready = [(g, entry[2]) for g, lane in self.model.lanes.items() for entry in lane]
        if not ready:
            return
        group, job_id = data.draw(st.sampled_from(ready))
        assert self.groups.remove(job_id, group, float(self.now)) is True
        lane = self.model.lanes[group]
        lane[:] = [e for e in lane if e[2] != job_id]
        if not lane:
            del self.model.lanes[group]
            self.model.rotation.remove(group)

    @rule(group=GROUPS)
    def pause_or_resume(self, group):
        if group in self.model.paused:
            assert self.groups.resume(group, float(self.now)) is True
            self.model.paused.discard(group)
        else:
            assert self.groups.pause(group) is True
            self.model.paused.add(group)

    @rule(group=GROUPS, concurrency=st.integers(0, 2))
    def set_concurrency(self, group, concurrency):
        if concurrency:
            self.groups.set_concurrency(group, concurrency)
            self.model.concurrency[group] = concurrency
        else:
            removed = self.groups.remove_concurrency(group, float(self.now))
            assert removed == (self.model.concurrency.pop(group, None) is not None)

    @rule(group=GROUPS, limit=st.sampled_from([None, (1, 5), (2, 20)]))
    def set_rate_limit(self, group, limit):
        if limit is None:
            removed = self.groups.remove_rate_limit(group, float(self.now))
            assert removed == (self.model.rate.pop(group, None) is not None)
        else:
            self.groups.set_rate_limit(group, *limit)
            self.model.rate[group] = limit
        self.model.windows.pop(group, None)

    @rule(group=GROUPS, duration=st.integers(1, 30))
    def limit_until(self, group, duration):
        self.groups.limit_until(group, float(self.now + duration))
        self.model.manual[group] = self.now + duration

    @invariant()
    def agrees_with_model(self):
        model = self.model
        assert self.groups.rotation() == model.rotation
        ready = sum(len(lane) for lane in model.lanes.values())
        assert self.groups.ready_count == ready
        assert len(self.groups) == ready + sum(model.delayed.values())
        for group in "ABCD":
            depth = len(model.lanes.get(group, ())) + model.delayed.get(group, 0)
            assert self.groups.depth(group) == depth
            assert self.groups.active_count(group) == model.active.get(group, 0)
            assert self.groups.is_paused(group) == (group in model.paused)
            assert self.groups.concurrency(group) == model.concurrency.get(group)
            assert self.groups.rate_limit(group) == model.rate.get(group)


GroupSchedulerMachine.TestCase.settings = settings(max_examples=150, stateful_step_count=60, deadline=None)
TestGroupSchedulerModel = GroupSchedulerMachine.TestCase

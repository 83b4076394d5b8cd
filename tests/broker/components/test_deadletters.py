"""The dead-letter queue without I/O: entry times, auto-retry scheduling, eviction, selection and its policy."""
from __future__ import annotations

import math
from typing import Any

from bunqueue._core.jobfactory import JobFactory
from bunqueue.broker.components.deadletters import DEFAULT_CONFIG, DeadLetters, can_auto_retry, merge_config
from bunqueue.broker.components.queues import QueueState
from bunqueue.broker.timers.deadlines import Alarms

NOW = 1_800_000_000_000.0


def make_dlq(**config: Any) -> tuple[DeadLetters, list[float]]:
    q = QueueState("q")
    q.dlq_config = merge_config(DEFAULT_CONFIG, config) if config else None
    alarms = Alarms()
    wakes: list[float] = []
    alarms.arm = lambda kind, when: wakes.append(when)
    return DeadLetters({"q": q}, alarms), wakes


def job(name: str = "j") -> Any:
    return JobFactory().build({"name": name, "data": 1}, "q", NOW, False)


def test_entry_times_follow_the_policy_at_filing():
    dlq, wakes = make_dlq(maxAge=1000)
    entry, evicted = dlq.add(job(), "explicit_fail", "e", [], NOW)
    assert (entry["enteredAt"], entry["expiresAt"], entry["nextRetryAt"], evicted) == (NOW, NOW + 1000, None, [])
    assert wakes == [NOW + 1000] and dlq.next_due() == NOW + 1000
    never, _ = make_dlq(maxAge=None)[0].add(job(), "unknown", None, [], NOW)
    assert never["expiresAt"] is None


def test_due_time_is_the_earlier_of_retry_and_expiry():
    dlq, _ = make_dlq(autoRetry=True, autoRetryInterval=50, maxAge=1000)
    entry, _ = dlq.add(job(), "unknown", None, [], NOW)
    assert dlq.next_due() == NOW + 50
    assert [e["job"].id for e in dlq.pop_due(NOW + 50)] == [entry["job"].id]
    dlq.queues["q"].dlq_config = merge_config(DEFAULT_CONFIG, {"autoRetry": False, "maxAge": 1000})
    dlq.schedule(entry, dlq.config("q"))
    assert dlq.next_due() == NOW + 1000


def test_generation_doubles_the_interval_and_stops_at_max():
    dlq, _ = make_dlq(autoRetry=True, autoRetryInterval=100, maxAutoRetries=3)
    j = job()
    entry, _ = dlq.add(j, "unknown", None, [], NOW)
    for retry, gap in [(1, 100.0), (2, 200.0), (3, None)]:
        dlq.keep_generation(entry, NOW)
        dlq.remove("q", j.id)
        entry, _ = dlq.add(j, "unknown", None, [], NOW + 1)
        assert (entry["retryCount"], entry["enteredAt"]) == (retry, NOW)
        assert entry["nextRetryAt"] == (None if gap is None else NOW + gap)
    assert not can_auto_retry(entry, dlq.config("q"), math.inf)


def test_max_entries_evicts_oldest_first():
    dlq, _ = make_dlq(maxEntries=2)
    jobs = [job(n) for n in "abc"]
    evicted = [dlq.add(j, "unknown", None, [], NOW)[1] for j in jobs]
    assert evicted == [[], [], [jobs[0].id]]
    assert [e["job"].name for e in dlq.entries("q")] == ["b", "c"]
    assert jobs[0].id not in dlq.due and dlq.get(jobs[0].id) is None


def test_select_filters_then_pages():
    dlq, _ = make_dlq()
    for i, name in enumerate("abcd"):
        dlq.add(job(name), "unknown" if name == "d" else "explicit_fail", None, [], NOW + i)
    def names(spec: dict[str, Any]) -> list[str]:
        return [e["job"].name for e in dlq.select("q", spec, NOW)]

    assert names({"reason": "explicit_fail", "offset": 1}) == ["b", "c"]
    assert names({"olderThan": NOW + 1, "newerThan": NOW + 1}) == ["b"]
    assert names({"offset": -1}) == ["d"] and names({"limit": -1}) == ["a", "b", "c"]


def test_merge_config_floors_clamps_and_keeps_bad_fields():
    merged = merge_config(DEFAULT_CONFIG, {"autoRetry": 1, "autoRetryInterval": 1.9, "maxEntries": 0,
                                           "maxAutoRetries": math.inf, "maxAge": None})
    assert merged == DEFAULT_CONFIG | {"autoRetryInterval": 1, "maxEntries": 1, "maxAge": None}
    assert list(merged) == ["autoRetry", "autoRetryInterval", "maxAutoRetries", "maxAge", "maxEntries"]

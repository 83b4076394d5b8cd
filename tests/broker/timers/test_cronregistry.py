"""The cron registry on a broker, driven by an injected clock: nothing here waits."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue._core.jobs import NO_DATA
from bunqueue._testbase.clock import FakeClock
from bunqueue.broker.facade import Broker
from bunqueue.errors import CommandError
from bunqueue.storage import MemoryStore

REPEAT_EVERY = "Cron repeatEvery must be a positive safe integer number of milliseconds"
T0 = 1_800_000_000_000.0  # a round minute (2027-01-15 08:00 UTC)


class RecordingStore(MemoryStore):
    """Remembers the order of cron writes and job inserts."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def cron_changed(self, name: str, record: dict[str, Any]) -> None:
        self.calls.append(("cron", (name, record["executions"], record["nextRun"])))

    def cron_removed(self, name: str) -> None:
        self.calls.append(("cron-removed", name))

    def job_added(self, job: Any) -> None:
        self.calls.append(("job", job.queue))


def make(now: float = T0, store: Any = None) -> tuple[Broker, FakeClock, list[tuple[str, float]]]:
    clock = FakeClock(now)
    broker = Broker(store=store, clock=clock)
    alarms: list[tuple[str, float]] = []
    broker.wake_at = lambda kind, when: alarms.append((kind, when))
    return broker, clock, alarms


def jobs_in(broker: Broker, queue: str) -> list[Any]:
    return [job for job in broker.jobs.values() if job.queue == queue]


def test_interval_cron_first_run_and_the_alarm() -> None:
    broker, clock, alarms = make()
    cron = broker.crons.upsert({"name": "c", "queue": "q", "data": {"a": 1}, "repeatEvery": 1000})
    assert cron.next_run == T0 + 1000
    assert alarms == [("cron", T0 + 1000)]
    assert broker.crons.fire_due(T0 + 999) == T0 + 1000
    assert jobs_in(broker, "q") == []
    assert broker.crons.fire_due(T0 + 1000) == T0 + 2000
    (job,) = jobs_in(broker, "q")
    assert (job.name, job.data, job.unique_key) == ("default", {"a": 1}, "cron:c")
    assert cron.executions == 1


def test_a_cron_without_data_spawns_jobs_without_data() -> None:
    broker, clock, _ = make()
    cron = broker.crons.upsert({"name": "c", "queue": "q", "repeatEvery": 1000})
    assert "data" not in cron.record()
    broker.crons.fire_due(T0 + 1000)
    (job,) = jobs_in(broker, "q")
    assert job.data is NO_DATA
    assert broker.crons.upsert({"name": "d", "queue": "q", "data": None, "repeatEvery": 1000}).record()["data"] is None


def test_sub_minute_intervals_fire_every_time() -> None:
    broker, clock, _ = make()
    broker.crons.upsert({"name": "c", "queue": "q", "data": 1, "repeatEvery": 100, "preventOverlap": False})
    when = broker.crons.next_due()
    fired = 0
    while when is not None and when <= T0 + 1000:
        when = broker.crons.fire_due(when)
        fired += 1
    assert fired == 10 and len(jobs_in(broker, "q")) == 10


def test_a_late_interval_run_is_collapsed_and_keeps_its_phase() -> None:
    broker, clock, _ = make()
    cron = broker.crons.upsert({"name": "c", "queue": "q", "data": 1, "repeatEvery": 1000})
    # Fired 5.5 runs late: one job, and the next run is the first on the original phase after now.
    assert broker.crons.fire_due(T0 + 6500) == T0 + 7000
    assert len(jobs_in(broker, "q")) == 1 and cron.executions == 1


def test_calendar_cron_in_a_time_zone() -> None:
    broker, clock, _ = make()
    cron = broker.crons.upsert(
        {"name": "c", "queue": "q", "data": None, "schedule": "0 9 * * *", "timezone": "Asia/Tokyo"}
    )
    # 09:00 in Tokyo is 00:00 UTC: the next one after 08:00 UTC is tomorrow.
    assert cron.next_run == T0 + 16 * 3_600_000
    assert broker.crons.fire_due(cron.next_run) == T0 + 40 * 3_600_000


def test_immediately_fires_a_new_cron_at_once_but_not_an_update() -> None:
    broker, clock, _ = make()
    cron = broker.crons.upsert({"name": "c", "queue": "q", "data": 1, "repeatEvery": 60_000, "immediately": True})
    assert cron.next_run == T0
    broker.crons.fire_due(T0)
    assert cron.executions == 1
    clock.now = T0 + 10
    again = broker.crons.upsert({"name": "c", "queue": "q", "data": 2, "repeatEvery": 60_000, "immediately": True})
    assert again.next_run == T0 + 10 + 60_000
    assert again.executions == 1


def test_max_limit_counts_runs_and_the_cron_goes_when_due_again() -> None:
    broker, clock, _ = make()
    broker.crons.upsert({"name": "c", "queue": "q", "data": 1, "repeatEvery": 1000, "maxLimit": 2,
                         "preventOverlap": False})
    broker.crons.fire_due(T0 + 1000)
    broker.crons.fire_due(T0 + 2000)
    assert broker.crons.get("c").executions == 2
    assert broker.crons.fire_due(T0 + 3000) is None
    assert len(jobs_in(broker, "q")) == 2
    with pytest.raises(CommandError):
        broker.crons.get("c")


def test_the_run_is_stored_before_its_job_is_pushed() -> None:
    store = RecordingStore()
    broker, clock, _ = make(store=store)
    broker.crons.upsert({"name": "c", "queue": "q", "data": 1, "repeatEvery": 1000})
    store.calls.clear()
    broker.crons.fire_due(T0 + 1000)
    assert store.calls == [("cron", ("c", 1, T0 + 2000)), ("job", "q")]


def test_prevent_overlap_dedups_against_a_waiting_run() -> None:
    broker, clock, _ = make()
    broker.crons.upsert({"name": "c", "queue": "q", "data": 1, "repeatEvery": 1000})
    broker.crons.fire_due(T0 + 1000)
    broker.crons.fire_due(T0 + 2000)
    # The first run still waits: the second is counted but not queued twice.
    assert len(jobs_in(broker, "q")) == 1
    assert broker.crons.get("c").executions == 2


def test_skip_if_no_worker_skips_without_counting() -> None:
    broker, clock, _ = make()
    cron = broker.crons.upsert({"name": "c", "queue": "q", "data": 1, "repeatEvery": 1000, "skipIfNoWorker": True})
    assert broker.crons.fire_due(T0 + 1000) == T0 + 2000
    assert cron.executions == 0 and jobs_in(broker, "q") == []
    broker.workers.register(1, None, ["q"], 1, None, None, None, None)
    broker.crons.fire_due(T0 + 2000)
    assert cron.executions == 1 and len(jobs_in(broker, "q")) == 1


def test_job_options_and_custom_unique_key_reach_the_job() -> None:
    broker, clock, _ = make()
    broker.crons.upsert({
        "name": "c", "queue": "q", "data": 1, "repeatEvery": 1000, "jobName": "tick", "priority": 4,
        "uniqueKey": "mine", "jobOptions": {"maxAttempts": 7, "timeout": 500, "removeOnComplete": True},
    })
    broker.crons.fire_due(T0 + 1000)
    (job,) = jobs_in(broker, "q")
    assert (job.name, job.priority, job.unique_key, job.max_attempts, job.timeout, job.remove_on_complete) == (
        "tick", 4, "mine", 7, 500, True
    )


def test_delete_leaves_nothing_to_fire_and_the_heap_stays_bounded() -> None:
    broker, clock, _ = make()
    for i in range(1000):
        broker.crons.upsert({"name": "c", "queue": "q", "data": i, "repeatEvery": 1000 + i})
    assert len(broker.crons.heap) <= 2 * len(broker.crons.crons) + 64
    assert broker.crons.remove("c")
    assert not broker.crons.remove("c")
    assert broker.crons.fire_due(T0 + 10**9) is None
    assert jobs_in(broker, "q") == []


def test_load_skips_or_collapses_missed_runs() -> None:
    broker, clock, _ = make()
    base = {"queue": "q", "data": 1, "schedule": None, "repeatEvery": 60_000, "priority": 0, "maxLimit": None,
            "timezone": None, "jobName": "default", "executions": 3, "nextRun": T0 - 600_000}
    broker.crons.load([
        {**base, "name": "skip", "skipMissedOnRestart": True},
        {**base, "name": "catch-up", "skipMissedOnRestart": False},
    ])
    assert broker.crons.get("skip").next_run == T0 + 60_000
    assert broker.crons.get("catch-up").next_run == T0 - 600_000
    assert broker.crons.fire_due(T0) == T0 + 60_000
    # Ten missed runs of catch-up became one job; skip fired none.
    assert len(jobs_in(broker, "q")) == 1
    assert broker.crons.get("catch-up").executions == 4 and broker.crons.get("skip").executions == 3


@pytest.mark.parametrize(
    "cmd, message",
    [
        ({"name": "c", "queue": "q", "data": 1}, "Cron job must have either schedule or repeatEvery"),
        ({"name": "c", "queue": "q", "repeatEvery": 0}, REPEAT_EVERY),
        ({"name": "c", "queue": "q", "repeatEvery": 2**53}, REPEAT_EVERY),
        ({"name": "c", "queue": "q", "repeatEvery": True}, REPEAT_EVERY),
        (
            {"name": "c", "queue": "q", "schedule": "0 0 30 2 *"},
            "Invalid cron expression: Cron expression has no future occurrences",
        ),
        (
            {"name": "c", "queue": "q", "schedule": "0 9 * * *", "timezone": "Nowhere/City"},
            "Invalid cron expression: Bun.cron: unknown time zone 'Nowhere/City'",
        ),
        ({"queue": "q", "repeatEvery": 10}, "name must be a string"),
        ({"name": "", "queue": "q", "repeatEvery": 10}, "name must be a non-empty string"),
        ({"name": "c", "queue": "bad name", "repeatEvery": 10}, None),
        ({"name": "c", "queue": "q", "repeatEvery": 10, "priority": "x"}, "priority must be a number"),
        (
            {"name": "c", "queue": "q", "repeatEvery": 10, "jobOptions": {"timeout": -1}},
            "jobOptions.timeout must be at least 0",
        ),
        ({"name": "c", "queue": "q", "repeatEvery": 10, "jobOptions": 3}, "jobOptions must be an object"),
        ({"name": "c", "queue": "q", "repeatEvery": 10, "dedup": []}, "dedup must be an object"),
        ({"name": "c", "queue": "q", "repeatEvery": 10, "skipIfNoWorker": "yes"}, "skipIfNoWorker must be a boolean"),
    ],
)
def test_refusals(cmd: dict[str, Any], message: str | None) -> None:
    broker, clock, _ = make()
    with pytest.raises(CommandError) as info:
        broker.crons.upsert(cmd)
    if message is not None:
        assert info.value.message == message
    else:
        assert "queue" in info.value.message.lower()
    assert broker.crons.listing() == []


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(
    st.sampled_from(["upsert", "remove", "fire"]),
    st.integers(0, 7),
    st.integers(1, 5000),
), max_size=60))
def test_the_heap_fires_exactly_what_a_scan_would(ops: list[tuple[str, int, int]]) -> None:
    """Against a model that scans every cron: the same runs fire, in any mix of upserts, deletes and ticks."""
    broker, clock, _ = make()
    model: dict[str, list[float]] = {}  # name -> [next_run, every, executions]
    for op, n, value in ops:
        name = f"c{n}"
        if op == "upsert":
            broker.crons.upsert({"name": name, "queue": "q", "data": 1, "repeatEvery": value, "preventOverlap": False})
            runs = model[name][2] if name in model else 0
            model[name] = [clock.now + value, value, runs]
        elif op == "remove":
            assert broker.crons.remove(name) == (name in model)
            model.pop(name, None)
        else:
            clock.now += value
            for entry in model.values():
                if entry[0] <= clock.now:
                    entry[2] += 1
                    missed = (clock.now - entry[0]) // entry[1] + 1
                    entry[0] += missed * entry[1]
            following = broker.crons.fire_due(clock.now)
            assert following == (min(e[0] for e in model.values()) if model else None)
        assert {c.name: [c.next_run, c.repeat_every, c.executions] for c in broker.crons.crons.values()} == model
        assert len(broker.crons.heap) <= 2 * len(model) + 64

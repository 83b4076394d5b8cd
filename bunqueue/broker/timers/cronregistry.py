"""Cron schedules: the registry, one heap of next-run times, and firing.

The server arms one loop timer (deadline kind ``CRON``) for the earliest next run; ``fire_due`` pushes
the jobs of every cron that is due and names the next earliest run. Nothing scans the registry on a
period, so 10,000 idle crons cost one armed timer.

A firing is counted and handed to the store before its job is pushed (both go in the same commit). A
cron whose run time passed while nothing could fire it (a restart, a blocked loop) fires once and moves
on to its next future run: missed runs are collapsed, never replayed one by one.
"""
from __future__ import annotations

import heapq
import logging
from collections.abc import Callable
from typing import Any

from bunqueue import errors, options
from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.jobs import NO_DATA
from bunqueue.broker.clock import now_ms
from bunqueue.broker.components import eventnames
from bunqueue.broker.components.eventhub import EventHub
from bunqueue.broker.components.recurrence import Schedule, shared
from bunqueue.broker.timers.deadlines import CRON, Alarms
from bunqueue.errors import CommandError
from bunqueue.storage import Store

log = logging.getLogger("bunqueue.cron")

# Spawned jobs carry this unique-key prefix unless the cron names its own key; the broker drops such a job
# instead of requeueing it when its attempt is lost, so a reconnecting worker gets no stale run.
SPAWNED_KEY_PREFIX = "cron:"
MAX_SAFE_INTEGER = 2**53 - 1
# The per-job options a cron passes on to every job it spawns.
JOB_OPTION_KEYS = ("maxAttempts", "backoff", "timeout", "delay", "stallTimeout", "removeOnComplete", "removeOnFail")
# cron:skipped's reason for a run skipped because no live worker serves the queue.
NO_WORKER = "no-worker"
FLAGS = (
    ("skipMissedOnRestart", True),
    ("skipIfNoWorker", False),
    ("preventOverlap", True),
)


class Cron:
    """One schedule. ``generation`` tells its current heap entry from entries left by earlier versions."""

    __slots__ = (
        "data", "dedup", "executions", "generation", "job_name", "job_options", "max_limit", "name",
        "next_run", "prevent_overlap", "priority", "queue", "repeat_every", "schedule", "skip_if_no_worker",
        "skip_missed_on_restart", "timer", "timezone", "unique_key",
    )

    def __init__(self, definition: dict[str, Any]) -> None:
        self.name: str = definition["name"]
        self.job_name: str = definition["jobName"]
        self.queue: str = definition["queue"]
        # NO_DATA: the Cron request had no data, and neither have its jobs (as a PUSH without data).
        self.data: Any = definition.get("data", NO_DATA)
        self.schedule: str | None = definition.get("schedule")
        self.repeat_every: int | None = definition.get("repeatEvery")
        self.priority: float = definition.get("priority", 0)
        self.max_limit: float | None = definition.get("maxLimit")
        self.timezone: str | None = definition.get("timezone")
        self.unique_key: str | None = definition.get("uniqueKey")
        self.dedup: dict[str, Any] | None = definition.get("dedup")
        self.skip_missed_on_restart: bool = definition.get("skipMissedOnRestart", True)
        self.skip_if_no_worker: bool = definition.get("skipIfNoWorker", False)
        self.prevent_overlap: bool = definition.get("preventOverlap", True)
        self.job_options: dict[str, Any] | None = definition.get("jobOptions")
        self.next_run: float = definition.get("nextRun", 0.0)
        self.executions: int = definition.get("executions", 0)
        self.timer = shared(self.schedule, self.timezone) if self.schedule is not None else None
        self.generation = 0

    def view(self) -> dict[str, Any]:
        """The wire shape of Cron, CronGet and CronList."""
        return {
            "name": self.name,
            "jobName": self.job_name,
            "queue": self.queue,
            "schedule": self.schedule,
            "repeatEvery": self.repeat_every,
            "nextRun": self.next_run,
            "executions": self.executions,
            "maxLimit": self.max_limit,
            "timezone": self.timezone,
            "priority": self.priority,
        }

    def record(self) -> dict[str, Any]:
        """Everything needed to rebuild the cron after a restart (its stored row)."""
        out = self.view()
        if self.data is not NO_DATA:
            out["data"] = self.data
        out.update(
            uniqueKey=self.unique_key,
            dedup=self.dedup,
            skipMissedOnRestart=self.skip_missed_on_restart,
            skipIfNoWorker=self.skip_if_no_worker,
            preventOverlap=self.prevent_overlap,
            jobOptions=self.job_options,
        )
        return out

    def at_limit(self) -> bool:
        return self.max_limit is not None and self.executions >= self.max_limit

    def following(self, scheduled: float, now: float) -> float | None:
        """The next run after one that was due at ``scheduled`` and fired at ``now``.

        An interval keeps its phase (scheduled + k * every) but never lands in the past; a calendar
        schedule takes its first occurrence after ``now``.
        """
        if self.timer is not None:
            return self.timer.next_after(now)
        every = self.repeat_every
        assert every is not None
        following = scheduled + every
        if following <= now:
            following += ((now - following) // every + 1) * every
        return following

    def first_run(self, now: float) -> float | None:
        return self.timer.next_after(now) if self.timer is not None else now + (self.repeat_every or 0)

    def job_options_for_push(self) -> dict[str, Any]:
        unique_key = self.unique_key
        if unique_key is None and self.prevent_overlap:
            unique_key = SPAWNED_KEY_PREFIX + self.name
        opts: dict[str, Any] = {"name": self.job_name, "priority": self.priority}
        if self.data is not NO_DATA:
            opts["data"] = self.data
        if unique_key is not None:
            opts["uniqueKey"] = unique_key
        if self.dedup is not None:
            opts["dedup"] = self.dedup
        if self.job_options:
            for key in JOB_OPTION_KEYS:
                if self.job_options.get(key) is not None:
                    opts[key] = self.job_options[key]
        return opts


def announcement(cron: Cron) -> dict[str, Any]:
    """What cron:created and cron:updated tell of a cron."""
    data: dict[str, Any] = {"name": cron.name, "queue": cron.queue}
    # A field the cron has not is left out, as JSON leaves out the original's undefined.
    if cron.schedule is not None:
        data["pattern"] = cron.schedule
    if cron.repeat_every is not None:
        data["every"] = cron.repeat_every
    data["nextRun"] = cron.next_run
    return data


def is_spawned(job: Any) -> bool:
    """A job a cron pushed under its default key: dropped, not requeued, when its attempt is lost."""
    key = job.unique_key
    return key is not None and key.startswith(SPAWNED_KEY_PREFIX)


def parse_definition(cmd: dict[str, Any], now: float) -> dict[str, Any]:
    """Validate a Cron request into a definition (the stored form, without nextRun and executions).

    The timing is checked first, as the reference checks it before anything else; then the name, the
    queue and the rest."""
    schedule, repeat_every, timezone = _timing(cmd, now)
    name = options.required_string(cmd, "name")
    if not name:
        raise CommandError(errors.must_be_non_empty_string("name"))
    queue = options.queue_name(cmd)
    priority = options.finite_option(cmd, "priority")
    max_limit = options.finite_option(cmd, "maxLimit")
    definition: dict[str, Any] = {
        "name": name,
        "queue": queue,
        "schedule": schedule,
        "repeatEvery": repeat_every,
        "priority": 0 if priority is None else priority,
        # 0 or less means no limit, as everywhere else a limit is given.
        "maxLimit": max_limit if max_limit is not None and max_limit > 0 else None,
        "timezone": timezone,
        "uniqueKey": options.optional_string(cmd, "uniqueKey"),
        "dedup": options.optional_object(cmd, "dedup"),
        "jobOptions": _job_options(cmd),
    }
    for field, default in FLAGS:
        definition[field] = options.flag_or(cmd, field, default)
    # The spawned job's name and data follow PUSH's rules (a legacy `data.name` envelope included), and
    # every option it will carry is checked now, so firing never meets a job it cannot push.
    probe = Cron({**definition, "jobName": "", "data": cmd.get("data", NO_DATA)}).job_options_for_push()
    del probe["name"]
    if cmd.get("jobName") is not None:
        probe["name"] = cmd["jobName"]
    job = JobFactory().build(probe, queue, now, False)
    definition["jobName"] = job.name
    if job.data is not NO_DATA:
        definition["data"] = job.data
    return definition


def _timing(cmd: dict[str, Any], now: float) -> tuple[str | None, int | None, str | None]:
    """(schedule, repeatEvery, timezone): the schedule wins when both are given, and must have a run ahead."""
    repeat_every = cmd.get("repeatEvery")
    if repeat_every is not None:
        if (
            type(repeat_every) not in (int, float)
            or not 1 <= repeat_every <= MAX_SAFE_INTEGER
            or int(repeat_every) != repeat_every
        ):
            raise CommandError(errors.CRON_REPEAT_EVERY)
        repeat_every = int(repeat_every)
    schedule = options.optional_string(cmd, "schedule") or None
    if schedule is None and repeat_every is None:
        raise CommandError(errors.CRON_NEEDS_TIMING)
    if schedule is None:
        # As in the reference, an interval's zone is kept but never looked up: nothing reads it.
        return None, repeat_every, options.optional_string(cmd, "timezone")
    timezone = cmd.get("timezone")
    Schedule(schedule, timezone).check_future(now)
    return schedule, repeat_every, timezone


def _job_options(cmd: dict[str, Any]) -> dict[str, Any] | None:
    value = options.optional_object(cmd, "jobOptions")
    if value is None:
        return None
    kept = {key: value[key] for key in JOB_OPTION_KEYS if key in value}
    try:
        JobFactory().build(kept, "probe", 0.0, False)
    except CommandError as exc:
        raise CommandError(errors.job_option(exc.message)) from None
    return kept


# Pushes a job as PUSH would (queue, options) and answers its id; raises CommandError.
Push = Callable[[str, dict[str, Any]], str]
# Whether a live worker is registered for a queue.
WorkerCheck = Callable[[str], bool]


class CronRegistry:
    """Crons by name (in creation order) and a min-heap of (nextRun, generation, name)."""

    def __init__(
        self, store: Store, alarms: Alarms, push: Push, has_worker: WorkerCheck, clock: Callable[[], float] = now_ms,
        events: EventHub | None = None,
    ) -> None:
        self.events = events if events is not None else EventHub(clock)
        self.store = store
        self.alarms = alarms
        self.push = push
        self.has_worker = has_worker
        self.clock = clock
        self.crons: dict[str, Cron] = {}
        self.heap: list[tuple[float, int, str]] = []
        self.generations = 0

    # -- commands ----------------------------------------------------------------------------------

    def upsert(self, cmd: dict[str, Any]) -> Cron:
        now = self.clock()
        definition = parse_definition(cmd, now)
        cron = Cron(definition)
        existing = self.crons.get(cron.name)
        following = cron.first_run(now)
        assert following is not None  # parse_definition checked that a future run exists
        cron.next_run = following
        if existing is not None:
            # An update keeps the count of runs so far (and with it the progress toward maxLimit).
            cron.executions = existing.executions
        elif options.flag(cmd, "immediately"):
            cron.next_run = now
        self.crons[cron.name] = cron
        self.store.cron_changed(cron.name, cron.record())
        self._schedule(cron)
        if self.events.notices:
            self._announce(eventnames.CRON_UPDATED if existing is not None else eventnames.CRON_CREATED, cron)
        return cron

    def _announce(self, name: str, cron: Cron) -> None:
        self.events.notify(name, announcement(cron))

    def remove(self, name: Any) -> bool:
        cron = self.crons.pop(name, None) if type(name) is str else None
        if cron is None:
            return False
        # Its heap entry is left behind and skipped when it surfaces (its generation is gone).
        self.store.cron_removed(name)
        self._compact()
        if self.events.notices:
            self.events.notify(eventnames.CRON_DELETED, {"name": name})
        return True

    def get(self, name: Any) -> Cron:
        cron = self.crons.get(name) if type(name) is str else None
        if cron is None:
            raise CommandError(errors.CRON_NOT_FOUND)
        return cron

    def listing(self) -> list[dict[str, Any]]:
        return [cron.view() for cron in self.crons.values()]

    # -- restart -----------------------------------------------------------------------------------

    def load(self, records: list[dict[str, Any]]) -> None:
        """Crons read back at start. A run missed while the server was down is skipped (the default,
        and always with skipIfNoWorker) or fires once at start, however many were missed."""
        now = self.clock()
        for record in records:
            try:
                cron = Cron(record)
            except CommandError as exc:
                log.error("stored cron %r cannot be scheduled and is ignored: %s", record.get("name"), exc.message)
                continue
            if cron.next_run < now and (cron.skip_missed_on_restart or cron.skip_if_no_worker):
                following = cron.first_run(now)
                if following is None:
                    continue
                cron.next_run = following
                self.store.cron_changed(cron.name, cron.record())
            self.crons[cron.name] = cron
            self._schedule(cron)

    # -- firing ------------------------------------------------------------------------------------

    def next_due(self) -> float | None:
        heap = self.heap
        while heap and self._stale(heap[0]):
            heapq.heappop(heap)
        return heap[0][0] if heap else None

    def fire_due(self, now: float) -> float | None:
        """The CRON deadline handler: fire every due cron, return the next run time of any."""
        heap = self.heap
        while heap and heap[0][0] <= now:
            entry = heapq.heappop(heap)
            if self._stale(entry):
                continue
            cron = self.crons[entry[2]]
            if cron.at_limit():
                del self.crons[cron.name]
                self.store.cron_removed(cron.name)
                continue
            self._fire(cron, now)
        return self.next_due()

    def _fire(self, cron: Cron, now: float) -> None:
        scheduled = cron.next_run
        following = cron.following(scheduled, now)
        skip = cron.skip_if_no_worker and not self.has_worker(cron.queue)
        if not skip:
            cron.executions += 1
        if following is None:
            # A calendar schedule with no run left (a fixed date now past): it fires no more.
            del self.crons[cron.name]
            self.store.cron_removed(cron.name)
        else:
            cron.next_run = following
            self.store.cron_changed(cron.name, cron.record())
            # No alarm: fire_due answers the next run, for which the timer is armed again.
            self._schedule(cron, wake=False)
        if skip:
            if self.events.notices:
                self.events.notify(
                    eventnames.CRON_SKIPPED, {"name": cron.name, "queue": cron.queue, "reason": NO_WORKER})
            return
        try:
            self.push(cron.queue, cron.job_options_for_push())
        except CommandError as exc:
            # The run stays counted: its state was handed to the store first, as in the reference.
            log.warning("cron %r could not push its job: %s", cron.name, exc.message)
            if self.events.notices:
                # The reason as the original writes a thrown error: "Error: <message>".
                self.events.notify(eventnames.CRON_MISSED, {
                    "name": cron.name, "queue": cron.queue, "error": f"Error: {exc.message}"})
            return
        if self.events.notices:
            self.events.notify(eventnames.CRON_FIRED, {"name": cron.name, "queue": cron.queue})

    # -- heap --------------------------------------------------------------------------------------

    def _schedule(self, cron: Cron, wake: bool = True) -> None:
        self.generations += 1
        cron.generation = self.generations
        heapq.heappush(self.heap, (cron.next_run, cron.generation, cron.name))
        if wake:
            self.alarms.arm(CRON, cron.next_run)
        self._compact()

    def _stale(self, entry: tuple[float, int, str]) -> bool:
        cron = self.crons.get(entry[2])
        return cron is None or cron.generation != entry[1]

    def _compact(self) -> None:
        # Upserts and deletes leave stale entries; rebuild once they outnumber the live ones.
        if len(self.heap) > 2 * len(self.crons) + 64:
            self.heap = [(c.next_run, c.generation, c.name) for c in self.crons.values()]
            heapq.heapify(self.heap)

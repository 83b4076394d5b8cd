"""The SDK's simple mode, ``Bunqueue``, against a real server: processor, routes and batch modes,
middleware, in-process retries, the circuit breaker, TTLs, cancellation, deduplication, triggers,
schedulers, the rate gate, priority aging and the DLQ option; and its parts on their own."""
from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from bunqueue import Bunqueue, CancellationManager, CancelSignal, Job
from bunqueue._testbase.server import ServerProcess
from bunqueue.simple import WorkerCircuitBreaker, calculate_backoff, execute_with_retry

pytestmark = pytest.mark.timeout(60)


def _name(label: str) -> str:
    return f"simple-{label}-{uuid.uuid4().hex[:8]}"


def _until(what: str, condition: Callable[[], Any], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


class Outcomes:
    """The worker's completed and failed events, by job id."""

    def __init__(self, app: Bunqueue) -> None:
        self.completed: dict[str, Any] = {}
        self.failed: dict[str, str] = {}
        app.on("completed", lambda job, result: self.completed.__setitem__(job.id, result))
        app.on("failed", lambda job, error: self.failed.__setitem__(job.id, str(error)))

    def wait(self, *ids: str) -> None:
        _until(f"jobs {ids}", lambda: all(i in self.completed or i in self.failed for i in ids))


@pytest.fixture
def addr(server: ServerProcess) -> dict[str, Any]:
    return {"host": "127.0.0.1", "port": server.port, "poll_timeout_ms": 200}


@pytest.fixture
def apps() -> Iterator[list[Bunqueue]]:
    made: list[Bunqueue] = []
    yield made
    for app in made:
        if not app.is_closed():
            app.close()


def test_processor_with_middleware_in_order(addr: dict[str, Any], apps: list[Bunqueue]) -> None:
    calls: list[str] = []

    def outer(job: Job, next_: Callable[[], Any]) -> Any:
        calls.append("outer")
        return {"wrapped": next_()}

    def inner(job: Job, next_: Callable[[], Any]) -> Any:
        calls.append("inner")
        return next_()

    app = Bunqueue(_name("mw"), processor=lambda job: job.data["n"] + 1, **addr)
    apps.append(app)
    assert app.use(outer).use(inner) is app
    seen = Outcomes(app)
    job = app.add("inc", {"n": 1})
    seen.wait(job.id)
    assert seen.completed == {job.id: {"wrapped": 2}}
    assert calls == ["outer", "inner"]
    assert app.get_job_counts()["completed"] == 1 and app.count() == 0
    stored = app.get_job(job.id)
    assert stored is not None and stored.raw["name"] == "inc"
    assert app.is_running() and not app.is_paused()
    app.close()
    assert app.is_closed()


def test_routes_by_job_name(addr: dict[str, Any], apps: list[Bunqueue]) -> None:
    name = _name("routes")
    app = Bunqueue(name, routes={"email": lambda job: "sent", "sms": lambda job: "texted"}, **addr)
    apps.append(app)
    seen = Outcomes(app)
    ids = app.add_bulk([{"name": "email", "data": {}}, {"name": "sms", "data": {}},
                        {"name": "fax", "data": {}, "attempts": 1}])
    seen.wait(*ids)
    assert seen.completed == {ids[0]: "sent", ids[1]: "texted"}
    assert seen.failed == {ids[2]: f'No route for job "fax" in queue "{name}"'}


def test_batch_mode_hands_jobs_over_together(addr: dict[str, Any], apps: list[Bunqueue]) -> None:
    batches: list[list[int]] = []

    def process(jobs: list[Job]) -> list[int]:
        batches.append(sorted(j.data["n"] for j in jobs))
        return [j.data["n"] * 10 for j in jobs]

    name = _name("batch")
    app = Bunqueue(name, batch={"size": 3, "timeout": 300, "processor": process}, concurrency=3, autorun=False,
                   **addr)
    apps.append(app)
    seen = Outcomes(app)
    ids = app.add_bulk([{"name": "b", "data": {"n": n}} for n in range(4)])
    app.worker.start()
    seen.wait(*ids)
    assert seen.completed == {job_id: n * 10 for n, job_id in enumerate(ids)}
    # Three fill a batch; the fourth goes alone once the batch timeout passes.
    assert sorted(len(b) for b in batches) == [1, 3] and sorted(sum(batches, [])) == [0, 1, 2, 3]


def test_retry_inside_the_processor(addr: dict[str, Any], apps: list[Bunqueue]) -> None:
    tries: list[int] = []

    def flaky(job: Job) -> str:
        tries.append(len(tries) + 1)
        if len(tries) < 3:
            raise RuntimeError(f"try {len(tries)}")
        return "done"

    app = Bunqueue(_name("retry"), processor=flaky, retry={"max_attempts": 3, "delay": 10, "strategy": "fixed"},
                   **addr)
    apps.append(app)
    seen = Outcomes(app)
    job = app.add("x", {}, attempts=1)
    seen.wait(job.id)
    assert seen.completed == {job.id: "done"} and tries == [1, 2, 3]
    # The job stayed active through its retries: one server attempt.
    stored = app.get_job(job.id)
    assert stored is not None and stored.attempts == 0


def test_circuit_breaker_pauses_and_closes_again(addr: dict[str, Any], apps: list[Bunqueue]) -> None:
    state: dict[str, Any] = {"fail": True, "opened": [], "half": 0, "closed": 0}

    def process(job: Job) -> str:
        if state["fail"]:
            raise RuntimeError("down")
        return "up"

    breaker = {"threshold": 2, "reset_timeout": 500, "on_open": state["opened"].append,
               "on_half_open": lambda: state.__setitem__("half", state["half"] + 1),
               "on_close": lambda: state.__setitem__("closed", state["closed"] + 1)}
    app = Bunqueue(_name("cb"), processor=process, circuit_breaker=breaker, concurrency=1, **addr)
    apps.append(app)
    seen = Outcomes(app)
    failing = [app.add("x", {"i": i}, attempts=1).id for i in range(2)]
    seen.wait(*failing)
    assert app.get_circuit_state() == "open" and state["opened"] == [2]
    assert app.worker.is_paused()
    state["fail"] = False
    later = app.add("x", {"i": 9}, attempts=1)
    seen.wait(later.id)
    assert seen.completed == {later.id: "up"}
    assert (state["half"], state["closed"], app.get_circuit_state()) == (1, 1, "closed")
    assert not app.worker.is_paused()


def test_ttl_expires_jobs_that_waited_too_long(addr: dict[str, Any], apps: list[Bunqueue]) -> None:
    app = Bunqueue(_name("ttl"), processor=lambda job: "ran", ttl={"per_name": {"stale": 100}}, autorun=False,
                   **addr)
    apps.append(app)
    seen = Outcomes(app)
    stale = app.add("stale", {}, attempts=1)
    fresh = app.add("fresh", {}, attempts=1)
    time.sleep(0.3)
    app.worker.start()
    seen.wait(stale.id, fresh.id)
    assert seen.completed == {fresh.id: "ran"}
    assert seen.failed[stale.id].startswith("Job expired (age: ")
    app.set_name_ttl("fresh", 1)
    app.set_default_ttl(5)


def test_cancel_a_running_job(addr: dict[str, Any], apps: list[Bunqueue]) -> None:
    started = threading.Event()
    holder: dict[str, Bunqueue] = {}

    def long_job(job: Job) -> str:
        started.set()
        signal = holder["app"].get_signal(job.id)
        assert signal is not None
        deadline = time.monotonic() + 10
        while not signal.aborted and time.monotonic() < deadline:
            time.sleep(0.01)
        raise RuntimeError("cancelled by request" if holder["app"].is_cancelled(job.id) else "ran out")

    app = holder["app"] = Bunqueue(_name("cancel"), processor=long_job, **addr)
    apps.append(app)
    seen = Outcomes(app)
    job = app.add("long", {}, attempts=1)
    assert started.wait(10)
    assert app.is_cancelled(job.id) is False
    app.cancel(job.id, grace_period_ms=50)
    seen.wait(job.id)
    assert seen.failed == {job.id: "cancelled by request"}
    assert app.get_signal(job.id) is None


def test_deduplication_defaults_and_triggers(addr: dict[str, Any], apps: list[Bunqueue]) -> None:
    app = Bunqueue(_name("dedup"), routes={"order": lambda job: {"total": job.data["total"]},
                                            "receipt": lambda job: "mailed"},
                   deduplication={"ttl": 60000}, default_job_options={"priority": 3}, autorun=False, **addr)
    apps.append(app)
    first = app.add("order", {"total": 5})
    again = app.add("order", {"total": 5})
    other = app.add("order", {"total": 6})
    assert first.id == again.id != other.id
    stored = app.get_job(first.id)
    assert stored is not None and stored.priority == 3
    assert app.trigger({"on": "order", "create": "receipt", "data": lambda result, job: result,
                        "condition": lambda result, job: result["total"] > 5}) is app
    seen = Outcomes(app)
    app.worker.start()
    _until("the triggered receipt", lambda: len(seen.completed) == 3)
    receipts = [j for j in app.queue.get_completed() if j.raw["name"] == "receipt"]
    assert [j.data for j in receipts] == [{"total": 6}]


def test_schedulers_and_dlq_option(addr: dict[str, Any], apps: list[Bunqueue]) -> None:
    app = Bunqueue(_name("cron"), processor=lambda job: None, autorun=False, dlq={"maxEntries": 7}, **addr)
    apps.append(app)
    app.cron("nightly", "0 3 * * *", {"k": 1}, timezone="UTC")
    app.every("often", 60000, {"k": 2}, limit=5)
    assert sorted(s["name"] for s in app.list_crons()) == ["nightly", "often"]
    app.remove_cron("nightly")
    assert [s["name"] for s in app.list_crons()] == ["often"]
    assert app.queue.get_dlq_config()["maxEntries"] == 7


def test_rate_gate_spaces_job_starts(addr: dict[str, Any], apps: list[Bunqueue]) -> None:
    starts: list[float] = []
    app = Bunqueue(_name("rate"), processor=lambda job: starts.append(time.monotonic()),
                   rate_limit={"max": 2, "duration": 400}, concurrency=4, autorun=False, **addr)
    apps.append(app)
    seen = Outcomes(app)
    ids = app.add_bulk([{"name": "r", "data": {}} for _ in range(4)])
    app.worker.start()
    seen.wait(*ids)
    starts.sort()
    assert starts[2] - starts[0] >= 0.39, starts


def test_priority_aging_boosts_waiting_jobs(addr: dict[str, Any], apps: list[Bunqueue]) -> None:
    app = Bunqueue(_name("aging"), processor=lambda job: None, autorun=False,
                   priority_aging={"interval": 100, "min_age": 1, "boost": 2, "max_priority": 5}, **addr)
    apps.append(app)
    job = app.add("old", {})
    _until("the priority to reach its cap", lambda: (app.get_job(job.id) or job).priority == 5)


def test_pause_resume_and_options_are_checked(addr: dict[str, Any], apps: list[Bunqueue]) -> None:
    app = Bunqueue(_name("pause"), processor=lambda job: None, **addr)
    apps.append(app)
    app.pause()
    assert app.is_paused() and app.queue.is_paused()
    app.resume()
    assert not app.is_paused() and not app.queue.is_paused()
    with pytest.raises(ValueError, match='requires "processor", "routes", or "batch"'):
        Bunqueue("q", **addr)
    with pytest.raises(ValueError, match='use only one of'):
        Bunqueue("q", processor=print, routes={"a": print}, **addr)
    with pytest.raises(TypeError, match="unknown option.*: proccessor"):
        Bunqueue("q", proccessor=print, **addr)


def test_embedded_app_without_a_server(apps: list[Bunqueue]) -> None:
    app = Bunqueue(_name("embedded"), processor=lambda job: job.data["n"] * 3, embedded=True)
    apps.append(app)
    seen = Outcomes(app)
    job = app.add("triple", {"n": 5})
    seen.wait(job.id)
    assert seen.completed == {job.id: 15}


def test_parts_on_their_own() -> None:
    manager = CancellationManager()
    signal = manager.register("a")
    assert isinstance(signal, CancelSignal) and not signal.aborted
    manager.cancel("missing")
    manager.cancel("a")
    assert signal.aborted and manager.is_cancelled("a")
    other = manager.register("b")
    manager.destroy_all()
    assert other.aborted and manager.get_signal("b") is None

    error = RuntimeError("x")
    assert [calculate_backoff("exponential", n, 100, error, {}) for n in (1, 2, 3)] == [100, 200, 400]
    assert [calculate_backoff("fibonacci", n, 10, error, {}) for n in (1, 2, 3, 4)] == [10, 20, 30, 50]
    assert calculate_backoff("fixed", 5, 70, error, {}) == 70
    assert calculate_backoff("custom", 2, 1, error, {"custom_backoff": lambda a, e: a * 7}) == 14
    assert 50 <= calculate_backoff("jitter", 1, 100, error, {}) <= 150
    calls: list[int] = []

    def fails() -> None:
        calls.append(1)
        raise KeyError("nope")

    with pytest.raises(KeyError):
        execute_with_retry(fails, {"maxAttempts": 4, "delay": 1, "retry_if": lambda e, n: n < 2})
    assert len(calls) == 2

    class FakeWorker:
        paused = False

        def pause(self) -> None:
            self.paused = True

        def resume(self) -> None:
            self.paused = False

        def is_paused(self) -> bool:
            return self.paused

    worker = FakeWorker()
    breaker = WorkerCircuitBreaker({"threshold": 1, "reset_timeout": 60000}, worker)
    breaker.on_failure()
    assert breaker.is_open() and worker.paused
    breaker.reset()
    assert breaker.current_state == "closed" and not worker.paused
    breaker.destroy()

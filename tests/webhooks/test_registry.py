"""The webhook registry without I/O: which outboxes an event reaches, the bound, the wake-up, the payload."""
from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from bunqueue.webhooks.registry import Outbox, Webhook, WebhookRegistry, payload_of

ALL = ["job.pushed", "job.started", "job.completed", "job.failed", "job.progress"]


def registry_with(*hooks: Webhook, limit: int = 100) -> tuple[WebhookRegistry, list[int]]:
    registry = WebhookRegistry(outbox_limit=limit)
    wakes: list[int] = []
    registry.wake = lambda: wakes.append(1)
    for hook in hooks:
        registry.add(hook)
    return registry, wakes


def hook(hook_id: str, events: list[str] = ALL, queue: str | None = None) -> Webhook:
    return Webhook(hook_id, "https://example.com/h", events, queue, None, 0.0)


def test_an_event_reaches_the_hooks_that_want_it() -> None:
    every, only_q, only_done = hook("every"), hook("q", queue="q"), hook("done", ["job.completed"])
    registry, _ = registry_with(every, only_q, only_done)
    registry.offer("pushed", "q", "1", 5.0, {})
    registry.offer("pushed", "other", "2", 6.0, {})
    registry.offer("completed", "other", "3", 7.0, {"data": 1})
    registry.offer("stalled", "q", "4", 8.0, {})
    assert [r[2] for r in every.outbox] == ["1", "2", "3"]
    assert [r[2] for r in only_q.outbox] == ["1"]
    assert [r[2] for r in only_done.outbox] == ["3"]
    assert registry.offered == 3


def test_disabled_and_removed_hooks_get_nothing() -> None:
    a, b = hook("a"), hook("b")
    registry, _ = registry_with(a, b)
    registry.offer("pushed", "q", "1", 5.0, {})
    registry.set_enabled("a", False)
    removed = registry.remove("b")
    assert removed is b and b.removed and not b.outbox, "a removed hook's waiting events go with it"
    registry.offer("pushed", "q", "2", 6.0, {})
    assert [r[2] for r in a.outbox] == ["1"]
    registry.set_enabled("a", True)
    registry.offer("pushed", "q", "3", 7.0, {})
    assert [r[2] for r in a.outbox] == ["1", "3"]
    assert registry.stats() == {"total": 1, "enabled": 1}


def test_the_outbox_is_bounded_and_what_does_not_fit_is_counted() -> None:
    a, b = hook("a"), hook("b", ["job.completed"])
    registry, _ = registry_with(a, b, limit=3)
    for i in range(10):
        registry.offer("pushed", "q", str(i), 5.0, {})
    assert [r[2] for r in a.outbox] == ["0", "1", "2"]
    assert (a.dropped, b.dropped) == (7, 0)
    assert a.outbox.take() == ("pushed", "q", "0", 5.0, {})
    registry.offer("pushed", "q", "10", 5.0, {})
    assert [r[2] for r in a.outbox] == ["1", "2", "10"] and a.dropped == 7


def test_a_batch_is_offered_as_its_events_one_by_one_would_be() -> None:
    every, only_q, only_done = hook("every"), hook("q", queue="q"), hook("done", ["job.completed"])
    one_by_one = [hook("every"), hook("q", queue="q"), hook("done", ["job.completed"])]
    registry, wakes = registry_with(every, only_q, only_done, limit=4)
    reference, _ = registry_with(*one_by_one, limit=4)
    for queue, ids in (("q", ["1", "2", "3"]), ("other", ["4", "5"]), ("q", [])):
        registry.offer_many("pushed", queue, ids, 5.0)
        for job_id in ids:
            reference.offer("pushed", queue, job_id, 5.0, {})
    for batched, single in zip((every, only_q, only_done), one_by_one, strict=True):
        assert list(batched.outbox) == list(single.outbox)
        assert batched.dropped == single.dropped
    assert [r[2] for r in every.outbox] == ["1", "2", "3", "4"] and every.dropped == 1
    assert registry.offered == reference.offered == 5
    assert len(wakes) == 1


def test_a_batch_waits_as_one_run_and_is_taken_event_by_event() -> None:
    a = hook("a")
    registry, _ = registry_with(a, limit=10)
    ids = ["1", "2", "3"]
    registry.offer_many("pushed", "q", ids, 5.0)
    registry.offer("completed", "q", "1", 6.0, {"data": 2})
    assert len(a.outbox.runs) == 2 and len(a.outbox) == 4
    assert a.outbox.runs[0][2] is ids, "the batch's id list is shared, not copied per webhook"
    taken = [a.outbox.take() for _ in range(5)]
    assert taken == [("pushed", "q", "1", 5.0, {}), ("pushed", "q", "2", 5.0, {}), ("pushed", "q", "3", 5.0, {}),
                     ("completed", "q", "1", 6.0, {"data": 2}), None]
    assert len(a.outbox) == 0 and not a.outbox.runs


def test_a_batch_that_does_not_fit_is_cut_at_the_bound() -> None:
    a = hook("a")
    registry, _ = registry_with(a, limit=4)
    registry.offer("pushed", "q", "0", 5.0, {})
    assert a.outbox.take() is not None
    registry.offer("pushed", "q", "1", 5.0, {})
    registry.offer_many("pushed", "q", ["2", "3", "4", "5", "6"], 5.0)
    assert [r[2] for r in a.outbox] == ["1", "2", "3", "4"] and a.dropped == 2
    assert a.outbox.take() is not None and a.outbox.take() is not None
    registry.offer_many("pushed", "q", ["7", "8", "9"], 5.0)
    assert [r[2] for r in a.outbox] == ["3", "4", "7", "8"] and a.dropped == 3


@given(st.lists(st.one_of(st.integers(0, 4), st.just(-1)), max_size=40))
def test_outbox_model(steps: list[int]) -> None:
    """Against a plain list of events: runs of n ids put (n > 0 never empty), or one take (-1)."""
    outbox, model = Outbox(), []
    serial = 0
    for n in steps:
        if n < 0:
            assert outbox.take() == (model.pop(0) if model else None)
        elif n:
            run = ("pushed", "q", [str(serial + i) for i in range(n)], float(serial), {})
            serial += n
            outbox.put(run)
            model.extend(("pushed", "q", job_id, run[3], {}) for job_id in run[2])
        assert len(outbox) == len(model) and list(outbox) == model
    outbox.clear()
    assert len(outbox) == 0 and list(outbox) == [] and outbox.take() is None


def test_the_delivery_side_is_woken_only_when_it_said_it_was_idle() -> None:
    registry, wakes = registry_with(hook("a"))
    for i in range(5):
        registry.offer("pushed", "q", str(i), 5.0, {})
    assert len(wakes) == 1 and registry.idle is False
    registry.idle = True
    registry.offer("pushed", "q", "5", 5.0, {})
    registry.offer("stalled", "q", "6", 5.0, {})
    assert len(wakes) == 2


def test_payload_shape() -> None:
    record = ("failed", "q", "7", 1700000000123.0, {"data": {"x": 1}, "error": "boom", "terminal": True})
    payload = payload_of(record)
    assert payload == {"event": "job.failed", "timestamp": 1700000000123, "jobId": "7", "queue": "q",
                       "data": {"x": 1}, "error": "boom"}
    assert list(payload) == ["event", "timestamp", "jobId", "queue", "data", "error"]
    assert type(payload["timestamp"]) is int
    assert payload_of(("progress", "q", "8", 1.0, {"progress": 40})) == {
        "event": "job.progress", "timestamp": 1, "jobId": "8", "queue": "q", "progress": 40}

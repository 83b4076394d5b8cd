"""The compiled push path: option rules, and a model test against a naive validator."""
from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue._core.jobfactory import JobFactory, data_too_large, validate_queue_name
from bunqueue.errors import CommandError

NOW = 1_800_000_000_000.0


def build(opts: dict[str, Any], batch: bool = False):
    return JobFactory().build(opts, "q", NOW, batch)


def test_a_map_of_name_and_data_takes_the_defaults_and_any_other_key_is_read_as_an_option() -> None:
    # Keys made at run time are not the interned ones msgpack hands over: told apart by value all the same.
    name_key, priority_key = "".join(["na", "me"]), "".join(["prior", "ity"])
    for opts in ({"name": "n", "data": 1}, {name_key: "n", "cmd": "PUSH", "queue": "q", "reqId": "1"}):
        plain = build(opts).to_dict()
        assert plain["priority"] == 0 and plain["maxAttempts"] == 3 and plain["name"] == "n"
    assert build({name_key: "n", priority_key: 5}).priority == 5
    assert build({"data": 1, "name": "n", "delay": 10}).run_at == NOW + 10
    with pytest.raises(CommandError):
        build({"name": "n", 7: "x", "priority": "high"})


def test_ids_are_uuid7_and_sequences_increase() -> None:
    factory = JobFactory()
    a = factory.build({"name": "a"}, "q", NOW, False)
    b = factory.build({"name": "b"}, "q", NOW, False)
    assert a.id[14] == "7" and a.id < b.id and a.seq < b.seq
    assert factory.new_token() != factory.new_token()


def test_custom_id_field_depends_on_the_command() -> None:
    assert build({"name": "n", "jobId": "x"}).id == "x"
    assert build({"name": "n", "customId": "x"}).custom_id is None
    assert build({"name": "n", "customId": "y"}, batch=True).id == "y"


def test_queue_names() -> None:
    assert validate_queue_name("ok_Name-1.2:x") == "ok_Name-1.2:x"
    for bad, message in [(None, "required"), ("", "required"), ("a b", "invalid"), ("q" * 257, "too long")]:
        with pytest.raises(CommandError, match=message):
            validate_queue_name(bad)


def test_data_too_large_measures_json() -> None:
    assert not data_too_large("x" * (10 * 1024 * 1024 - 2))
    assert data_too_large("x" * (10 * 1024 * 1024 - 1))
    assert not data_too_large({"bin": b"\x00\x01"})


# -- model test --------------------------------------------------------------------------------------
# A naive statement of the numeric rules of tcp-job-commands.md, compared with the compiled path on random
# inputs: both must accept the same options, and accepted ones must store the same values.

NUMBERS = st.one_of(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["3", "-1.5", "abc", "", " 42 ", "1e3"]),
    st.booleans(),
)


def parse(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value.strip()) if value.strip() else None
    except ValueError:
        return None


def model_delay(value: Any) -> tuple[str, float | None]:
    d = parse(value)
    if d is None:
        return "delay must be a number", None
    if not math.isfinite(d):
        return "delay must be a finite number", None
    return "", max(-4.32e15, min(4.32e15, d))


def model_timeout(value: Any) -> tuple[str, float | None]:
    d = parse(value)
    if d is None:
        return "timeout must be a number", None
    if not math.isfinite(d):
        return "timeout must be a finite number", None
    if d < 0:
        return "timeout must be at least 0", None
    return "", min(4.32e15, d)


def model_attempts(value: Any) -> tuple[str, float | None]:
    d = parse(value)
    if d is None:
        return "maxAttempts must be a number", None
    if math.isnan(d):
        return "maxAttempts must be a finite number", None
    if d <= 1:
        return "", 1
    if d >= 2147483647:
        return "", 2147483647
    return "", math.ceil(d)


@settings(max_examples=400, deadline=None)
@given(delay=NUMBERS, timeout=NUMBERS, attempts=NUMBERS)
def test_numeric_rules_match_the_model(delay: Any, timeout: Any, attempts: Any) -> None:
    opts = {"name": "n", "delay": delay, "timeout": timeout, "maxAttempts": attempts}
    expected_errors = [e for e, _ in (model_delay(delay), model_attempts(attempts), model_timeout(timeout)) if e]
    try:
        job = build(opts)
    except CommandError as exc:
        # Fields are checked in a fixed order; the first violation is reported, naming its field.
        assert expected_errors, exc.message
        order = ["delay", "maxAttempts", "timeout"]
        first = min(expected_errors, key=lambda e: order.index(e.split(" ")[0]))
        assert exc.message == first
        return
    assert not expected_errors
    assert job.run_at == NOW + model_delay(delay)[1]
    assert job.timeout == model_timeout(timeout)[1]
    assert job.max_attempts == model_attempts(attempts)[1]


@settings(max_examples=200, deadline=None)
@given(priority=st.one_of(st.integers(-10, 3_000_000), st.floats(-5, 5)), grouped=st.booleans())
def test_priority_rules_match_the_model(priority: float, grouped: bool) -> None:
    opts: dict[str, Any] = {"name": "n", "priority": priority}
    if grouped:
        opts["groupId"] = "g"
    valid = not grouped or (priority == int(priority) and 0 <= priority <= 2097151)
    if valid:
        assert build(opts).priority == priority
    else:
        with pytest.raises(CommandError, match="group.priority"):
            build(opts)

"""The request decoder: JS `undefined` (msgpack ext type 0) is an absent option at any depth, and is kept
as sent inside payload fields (job data, results, progress, texts)."""
from __future__ import annotations

from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue.server import codec
from bunqueue.server.codec import PAYLOAD_FIELDS, UNDEFINED, BadFrame, decode_command, without_undefined

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=10),
    st.binary(max_size=10),
)
# A payload may hold anything, `undefined` at any depth and keys named like options or payload fields.
PAYLOADS = st.recursive(
    st.one_of(SCALARS, st.just(UNDEFINED)),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.text(max_size=6), st.sampled_from(sorted(PAYLOAD_FIELDS))), inner, max_size=4),
    ),
    max_leaves=20,
)
OPTION_KEYS = st.text(max_size=8).filter(lambda key: key not in PAYLOAD_FIELDS)


@st.composite
def option_maps(draw: st.DrawFn, depth: int = 0) -> tuple[dict[str, Any], dict[str, Any]]:
    """(a map as a client sends it, the same map with every `undefined` option left out)."""
    sent: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    option_kinds = ["scalar", "undefined"] + (["map", "list"] if depth < 2 else [])
    keys = draw(st.lists(OPTION_KEYS, max_size=5, unique=True))
    payload_keys = draw(st.lists(st.sampled_from(sorted(PAYLOAD_FIELDS)), max_size=2, unique=True))
    for key in keys + payload_keys:
        kind = "payload" if key in PAYLOAD_FIELDS else draw(st.sampled_from(option_kinds))
        if kind == "undefined" or (kind == "payload" and draw(st.booleans()) and draw(st.booleans())):
            # An option (or a payload field) whose whole value is undefined is absent.
            sent[key] = UNDEFINED
        elif kind == "payload":
            sent[key] = expected[key] = draw(PAYLOADS.filter(lambda value: value is not UNDEFINED))
        elif kind == "scalar":
            sent[key] = expected[key] = draw(SCALARS)
        elif kind == "map":
            sent[key], expected[key] = draw(option_maps(depth + 1))
        else:
            sent[key], expected[key] = draw(option_lists(depth + 1))
    return sent, expected


@st.composite
def option_lists(draw: st.DrawFn, depth: int) -> tuple[list[Any], list[Any]]:
    """A list of options (the jobs of PUSHB, ids): its maps are walked; an `undefined` element stays."""
    sent: list[Any] = []
    expected: list[Any] = []
    for kind in draw(st.lists(st.sampled_from(["scalar", "undefined", "map"]), max_size=3)):
        if kind == "map":
            item, want = draw(option_maps(depth + 1))
        else:
            item = want = UNDEFINED if kind == "undefined" else draw(SCALARS)
        sent.append(item)
        expected.append(want)
    return sent, expected


def packed(value: Any) -> bytes:
    return msgpack.packb(value, use_bin_type=True)


@settings(max_examples=300, deadline=None)
@given(option_maps())
def test_undefined_options_are_absent_at_any_depth(pair: tuple[dict[str, Any], dict[str, Any]]) -> None:
    sent, expected = pair
    decoded = decode_command(packed(sent))
    assert decoded == expected
    # Payload fields, and the values of every option, come back byte for byte.
    assert packed(decoded) == packed(expected)
    assert without_undefined(sent) == expected


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(OPTION_KEYS, SCALARS, max_size=6),
    st.dictionaries(st.sampled_from(sorted(PAYLOAD_FIELDS)), PAYLOADS),
)
def test_payload_fields_keep_undefined_byte_for_byte(options: dict[str, Any], payload: dict[str, Any]) -> None:
    request = {**options, **{k: v for k, v in payload.items() if v is not UNDEFINED}}
    jobs = [{"name": "j", **request}]
    decoded = decode_command(packed({"cmd": "PUSHB", "queue": "q", "jobs": jobs, "delay": UNDEFINED}))
    assert "delay" not in decoded
    assert packed(decoded["jobs"]) == packed(jobs)


def test_the_two_reported_frames() -> None:
    # 2.7.x Queue.add: every unset option of the job is undefined; one level deeper in dedup as well.
    job = {"name": "send", "data": {"to": "a", "cc": UNDEFINED}, "priority": UNDEFINED, "delay": UNDEFINED,
           "uniqueKey": "k", "dedup": {"ttl": 1000, "extend": UNDEFINED, "replace": UNDEFINED}}
    body = packed({"cmd": "PUSHB", "queue": "q", "jobs": [job], "reqId": "1"})
    assert b"\xa5delay\xd4\x00\x00" in body and b"\xa7replace\xd4\x00\x00" in body
    assert decode_command(body) == {"cmd": "PUSHB", "queue": "q", "reqId": "1", "jobs": [
        {"name": "send", "data": {"to": "a", "cc": UNDEFINED}, "uniqueKey": "k", "dedup": {"ttl": 1000}}]}


@pytest.mark.parametrize(
    ("request_", "expected"),
    [
        ({"cmd": "PUSH", "repeat": {"every": 5, "limit": UNDEFINED}}, {"cmd": "PUSH", "repeat": {"every": 5}}),
        ({"cmd": "PUSH", "backoff": {"type": "fixed", "delay": UNDEFINED}},
         {"cmd": "PUSH", "backoff": {"type": "fixed"}}),
        ({"cmd": "PULL", "group": {"concurrency": UNDEFINED, "limit": {"max": 1, "duration": UNDEFINED}}},
         {"cmd": "PULL", "group": {"limit": {"max": 1}}}),
        ({"cmd": "Cron", "data": {"x": UNDEFINED}, "jobOptions": {"timeout": UNDEFINED, "delay": 5}},
         {"cmd": "Cron", "data": {"x": UNDEFINED}, "jobOptions": {"delay": 5}}),
        ({"cmd": "PUSHF", "jobs": [{"id": "a", "input": {"data": {"k": UNDEFINED}, "priority": UNDEFINED}}]},
         {"cmd": "PUSHF", "jobs": [{"id": "a", "input": {"data": {"k": UNDEFINED}}}]}),
        ({"cmd": "ACKB", "ids": ["a", UNDEFINED], "results": [UNDEFINED, {"by": UNDEFINED}]},
         {"cmd": "ACKB", "ids": ["a", UNDEFINED], "results": [UNDEFINED, {"by": UNDEFINED}]}),
        ({"cmd": "Progress", "progress": {"step": UNDEFINED}, "message": UNDEFINED},
         {"cmd": "Progress", "progress": {"step": UNDEFINED}}),
        ({"cmd": "PUSHB", "jobs": [UNDEFINED, {"delay": UNDEFINED}]}, {"cmd": "PUSHB", "jobs": [UNDEFINED, {}]}),
    ],
)
def test_nested_option_maps(request_: dict[str, Any], expected: dict[str, Any]) -> None:
    assert decode_command(packed(request_)) == expected


def test_only_a_frame_that_holds_undefined_is_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    walked: list[dict[str, Any]] = []

    def spy(request: dict[str, Any]) -> dict[str, Any]:
        walked.append(request)
        return without_undefined(request)

    monkeypatch.setattr(codec, "without_undefined", spy)
    request = {"cmd": "PUSHB", "queue": "q", "jobs": [{"name": "a", "data": None, "dedup": {"ttl": 1}}]}
    assert decode_command(packed(request)) == request
    assert walked == []
    assert decode_command(packed({"cmd": "Ping", "x": {"y": UNDEFINED}})) == {"cmd": "Ping", "x": {}}
    assert walked[0]["cmd"] == "Ping"
    calls = len(walked)
    # The previous frame's `undefined` does not carry over to the next one.
    assert decode_command(packed(request)) == request
    assert len(walked) == calls


def test_other_ext_types_stay() -> None:
    ext = msgpack.ExtType(5, b"abc")
    request = {"cmd": "Ping", "x": ext, "y": {"z": ext, "u": UNDEFINED}}
    assert decode_command(packed(request)) == {"cmd": "Ping", "x": ext, "y": {"z": ext}}


def test_not_a_map_is_a_bad_frame() -> None:
    with pytest.raises(BadFrame):
        decode_command(packed([UNDEFINED]))
    with pytest.raises(BadFrame):
        decode_command(packed(UNDEFINED))

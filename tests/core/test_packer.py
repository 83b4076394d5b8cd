"""The reply packer: byte-identical to msgpack's Packer(use_bin_type=True), plus job records and frames."""
from __future__ import annotations

import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue._core.jobfactory import JobFactory
from bunqueue._core.packer import ReplyPacker
from bunqueue.errors import MAX_VALUE_DEPTH

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=300),
    st.binary(max_size=300),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=20),
        st.dictionaries(st.text(max_size=20), inner, max_size=20),
        st.dictionaries(st.integers(-5, 5), inner, max_size=5),
    ),
    max_leaves=60,
)


@settings(max_examples=500, deadline=None)
@given(VALUES)
def test_packs_like_msgpack(value: Any) -> None:
    assert ReplyPacker().pack(value) == msgpack.packb(value, use_bin_type=True)


@pytest.mark.parametrize(
    "value",
    [0, 127, 128, 255, 256, 65535, 65536, 2**32 - 1, 2**32, 2**64 - 1, -1, -32, -33, -128, -129,
     -32768, -32769, -(2**31), -(2**31) - 1, -(2**63), "x" * 31, "x" * 32, "x" * 255, "x" * 256,
     "x" * 65536, b"", b"x" * 256, b"x" * 70000, [0] * 15, [0] * 16, [0] * 70000,
     {str(i): i for i in range(16)}, msgpack.ExtType(5, b"ab"), msgpack.ExtType(1, b"x" * 3),
     (1, 2), 1.5, float("inf")],
)
def test_edge_sizes(value: Any) -> None:
    assert ReplyPacker().pack(value) == msgpack.packb(value, use_bin_type=True)


def test_unpackable_values_raise() -> None:
    with pytest.raises(TypeError):
        ReplyPacker().pack({"x": object()})
    with pytest.raises(OverflowError):
        ReplyPacker().pack(2**64)
    deep: list[Any] = []
    for _ in range(1100):
        deep = [deep]
    with pytest.raises(ValueError):
        ReplyPacker().pack(deep)


def test_values_nested_as_deep_as_admitted_pack_inside_a_reply() -> None:
    deep: list[Any] = [1]
    for _ in range(MAX_VALUE_DEPTH - 1):
        deep = [deep]
    reply = {"ok": True, "jobs": [{"job": {"data": deep}}]}
    assert ReplyPacker().pack(reply) == b"\x82\xa2ok\xc3\xa4jobs\x91\x81\xa3job\x81\xa4data" + b"\x91" * 500 + b"\x01"


@pytest.mark.parametrize(
    "encoded",
    [b"\xd6\xff\x00\x00\x00\x01", b"\xd7\xff\x00\x00\x00\x04\x00\x00\x00\x01",
     b"\xc7\x0c\xff\x00\x00\x00\x01\xff\xff\xff\xff\xff\xff\xff\xff"],
)
def test_timestamps_go_back_out_as_the_bytes_that_came_in(encoded: bytes) -> None:
    """Timestamp 32, 64 and 96, each in the shortest form for its value (as msgpackr writes them)."""
    assert ReplyPacker().pack(msgpack.unpackb(encoded)) == encoded


def _js_number(value: float) -> int | float:
    if value == int(value) and -(2**31) <= value < 2**32:
        return int(value)
    return value


@settings(max_examples=200, deadline=None)
@given(
    priority=st.integers(-5, 5),
    delay=st.floats(-1e6, 1e13, allow_nan=False),
    data=VALUES,
    with_data=st.booleans(),
    lifo=st.booleans(),
)
def test_job_packs_like_its_dict(priority: int, delay: float, data: Any, with_data: bool, lifo: bool) -> None:
    opts: dict[str, Any] = {"name": "n", "priority": priority, "delay": delay, "lifo": lifo}
    if with_data:
        opts["data"] = data
    job = JobFactory().build(opts, "q", 1_800_000_000_000.0, False)
    job.timeline = [{"state": "waiting", "timestamp": 1_800_000_000_000.0}]
    expected = job.to_dict()
    assert list(expected)[:3] == ["id", "queue", "name"]
    assert ("data" in expected) is with_data
    assert ReplyPacker().pack(job) == msgpack.packb(expected, use_bin_type=True)
    decoded = msgpack.unpackb(ReplyPacker().pack({"job": job}), strict_map_key=False)["job"]
    assert decoded["runAt"] == _js_number(1_800_000_000_000.0 + delay)
    assert isinstance(decoded["createdAt"], float), "a timestamp never goes out as a uint64"


def test_frames_are_length_prefixed_in_one_buffer() -> None:
    packer = ReplyPacker()
    replies = [{"ok": True, "reqId": i} for i in range(3)] + [{"big": "x" * 5_000_000}]
    data = packer.frames(replies)
    pos, out = 0, []
    while pos < len(data):
        (n,) = struct.unpack_from(">I", data, pos)
        out.append(msgpack.unpackb(data[pos + 4 : pos + 4 + n]))
        pos += 4 + n
    assert out == replies
    body = msgpack.packb({"ok": True})
    assert packer.frame({"ok": True}) == struct.pack(">I", len(body)) + body

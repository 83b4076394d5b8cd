"""RequestUnpacker against msgpack.unpackb(raw=False, strict_map_key=False), the reader it stands in for:
the same values, of the same types, for every body msgpack reads, and an error for every body it refuses."""
from __future__ import annotations

import math
import struct
import sys
from typing import Any

import msgpack
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from bunqueue._core.unpacker import RequestUnpacker
from bunqueue.server.codec import UNDEFINED

# One reader for every example: its string table carries over, as it does for a server's frames.
UNPACKER = RequestUnpacker(UNDEFINED, msgpack.ExtType, msgpack.Timestamp)


def reference(body: bytes) -> tuple[Any, bool]:
    """msgpack's reading of ``body`` with the server's ext hook, and whether it met an ``undefined``."""
    seen = [False]

    def ext_hook(code: int, data: bytes) -> Any:
        if code == 0:
            seen[0] = True
            return UNDEFINED
        return msgpack.ExtType(code, data)

    return msgpack.unpackb(body, raw=False, strict_map_key=False, ext_hook=ext_hook), seen[0]


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (``True == 1`` and ``1.0 == 1`` do not count). A loop
    rather than recursion: the nesting tests go 1,024 deep."""
    pending = [(a, b)]
    while pending:
        a, b = pending.pop()
        if type(a) is not type(b):
            return False
        if type(a) is float:
            if struct.pack(">d", a) != struct.pack(">d", b) and not (math.isnan(a) and math.isnan(b)):
                return False
        elif type(a) is list:
            if len(a) != len(b):
                return False
            pending.extend(zip(a, b))
        elif type(a) is dict:
            if list(a) != list(b):
                return False
            pending.extend(zip(a, b))
            pending.extend((a[key], b[key]) for key in a)
        elif a != b:
            return False
    return True


def check(body: bytes) -> None:
    try:
        expected, expected_seen = reference(body)
    except Exception:
        with pytest.raises((ValueError, TypeError)):
            UNPACKER.unpack(body)
        return
    value = UNPACKER.unpack(body)
    assert same(value, expected), (body, value, expected)
    assert UNPACKER.saw_undefined is expected_seen


def interned_keys(value: Any) -> bool:
    """Whether every ASCII str key at any depth is the interned object (the broker compares keys by
    identity first)."""
    if type(value) is list:
        return all(interned_keys(item) for item in value)
    if type(value) is dict:
        return all((type(k) is not str or not k.isascii() or sys.intern(k) is k) and interned_keys(v)
                   for k, v in value.items())
    return True


scalars = (
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=True)
    | st.text(max_size=40) | st.sampled_from(["name", "data", "queue", "jobs", "é", "x" * 31, "y" * 17])
    | st.binary(max_size=40)
    | st.builds(msgpack.ExtType, st.integers(1, 127), st.binary(max_size=20))
    | st.builds(msgpack.Timestamp, st.integers(-(2**40), 2**40), st.integers(0, 999_999_999))
    | st.just(UNDEFINED)
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(
        st.text(max_size=8) | st.integers(-5, 300) | st.none() | st.booleans(), inner, max_size=6),
    max_leaves=40,
)


@given(values, st.booleans())
@settings(max_examples=600, deadline=None)
def test_packed_values_read_as_msgpack_reads_them(value: Any, single_float: bool) -> None:
    try:
        body = msgpack.packb(value, use_bin_type=True, use_single_float=single_float)
    except OverflowError:  # a double past float32's range, packed as float32
        assume(False)
    check(body)
    assert interned_keys(UNPACKER.unpack(body))


@given(values, st.data())
@settings(max_examples=600, deadline=None)
def test_damaged_bodies_are_refused_or_read_as_msgpack_reads_them(value: Any, data: st.DataObject) -> None:
    body = bytearray(msgpack.packb(value, use_bin_type=True))
    for _ in range(data.draw(st.integers(1, 3))):
        action = data.draw(st.sampled_from(["flip", "cut", "append", "insert"]))
        at = data.draw(st.integers(0, len(body)))
        if action == "flip" and at < len(body):
            body[at] = data.draw(st.integers(0, 255))
        elif action == "cut":
            del body[at:]
        elif action == "append":
            body += data.draw(st.binary(min_size=1, max_size=4))
        else:
            body[at:at] = data.draw(st.binary(min_size=1, max_size=3))
    check(bytes(body))


@given(st.binary(max_size=64))
@example(b"")
@example(b"\xc1")
@example(b"\x81\x91\x01\x02")  # a list as a key: unhashable
@example(b"\xd6\xff\x00\x00\x00\x01")  # a 4-byte timestamp
@example(b"\xc7\x03\xff\x00\x00\x00")  # a timestamp of a length msgpack refuses
@example(b"\xd7\xff\xff\xff\xff\xff\x00\x00\x00\x00")  # nanoseconds past a second
@example(b"\xd4\x00\x00")  # msgpackr's undefined
@example(b"\xdd\xff\xff\xff\xff")  # an array header far past the body
@example(b"\xdf\xff\xff\xff\xff")
@settings(max_examples=1500, deadline=None)
def test_arbitrary_bytes_are_refused_or_read_as_msgpack_reads_them(body: bytes) -> None:
    check(body)


@pytest.mark.parametrize("depth", [1023, 1024, 1025, 1026])
@pytest.mark.parametrize("innermost", [b"\x91\x01", b"\x90", b"\x80", b"\x81\x01\x02"])
def test_nesting_limit_is_msgpacks(depth: int, innermost: bytes) -> None:
    check(b"\x91" * (depth - 1) + innermost)
    check(b"\x81\x00" * (depth - 1) + innermost)


def test_string_table_collisions_keep_every_string_its_own() -> None:
    # Far more short keys than the table has slots: every slot is taken and retaken.
    keys = [f"k{i}" for i in range(5000)]
    body = msgpack.packb({key: key[::-1] for key in keys})
    for _ in range(2):
        value = UNPACKER.unpack(body)
        assert list(value) == keys
        assert all(value[key] == key[::-1] for key in keys)


def test_repeated_short_strings_are_one_object_and_keys_are_interned() -> None:
    body = msgpack.packb([{"name": "job", "data": {"attempt": 1}} for _ in range(3)])
    jobs = UNPACKER.unpack(body)
    assert jobs[0]["name"] is jobs[1]["name"] is jobs[2]["name"]
    key = next(iter(jobs[0]))
    assert key is sys.intern("name")
    assert next(iter(jobs[2]["data"])) is sys.intern("attempt")


def test_buffers_other_than_bytes_are_read() -> None:
    body = msgpack.packb({"cmd": "Ping", "reqId": "7"})
    assert UNPACKER.unpack(bytearray(body)) == UNPACKER.unpack(memoryview(body)) == {"cmd": "Ping", "reqId": "7"}
    with pytest.raises(TypeError):
        UNPACKER.unpack("not a buffer")


def test_undefined_is_reported_per_body() -> None:
    UNPACKER.unpack(msgpack.packb({"a": UNDEFINED}))
    assert UNPACKER.saw_undefined
    UNPACKER.unpack(msgpack.packb({"a": 1}))
    assert not UNPACKER.saw_undefined

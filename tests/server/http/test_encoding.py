"""HTTP replies as JSON: replies made of plain values skip the wire round trip and must read exactly as if
they had not."""
from __future__ import annotations

import json
from typing import Any

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue.server.http import encoding

flat_values = st.one_of(st.text(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.none())
# Numbers of two decimals or fewer (sizes in MB, rates), around and past where their short form stops.
cents = st.one_of(
    st.floats(-1e14, 1e14).map(lambda x: round(x, 2)),
    st.integers(-(10**16), 10**16).map(lambda k: k / 100),
    st.integers(-(10**4), 10**4).map(lambda k: k / 100),
)


def through_the_wire(doc: Any) -> str:
    wire = msgpack.unpackb(encoding._PACKER.pack(doc), raw=False, strict_map_key=False, ext_hook=encoding._ext)
    return json.dumps(encoding._plain(wire), separators=(",", ":"), ensure_ascii=False)


plain_values = st.recursive(
    st.one_of(flat_values, st.floats(), cents, st.sampled_from([0.0, -0.0, 2.0**53, 2.0**53 - 1, 1e300, 3.0])),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(), inner, max_size=4)),
    max_leaves=20,
)


@given(st.dictionaries(st.text(), flat_values))
def test_flat_replies_read_as_the_wire_encoder_writes_them(doc: dict[str, Any]) -> None:
    assert encoding.dumps(doc) == through_the_wire(doc)
    assert encoding.json_bytes(doc) == through_the_wire(doc).encode()


@given(st.dictionaries(st.text(), plain_values))
def test_nested_plain_replies_read_as_the_wire_encoder_writes_them(doc: dict[str, Any]) -> None:
    assert encoding.dumps(doc) == through_the_wire(doc)
    assert encoding.json_bytes(doc) == through_the_wire(doc).encode()


@settings(max_examples=2000)
@given(st.lists(cents, min_size=1, max_size=8))
def test_numbers_of_two_decimals_read_as_python_writes_them(numbers: list[float]) -> None:
    assert encoding.json_bytes(numbers) == through_the_wire(numbers).encode()


def test_every_escape_and_number_edge_reads_as_the_json_module_writes_it() -> None:
    text = "".join(map(chr, range(0x80))) + "é\u2028\U0001F600"
    edges = [0.01, -0.01, 0.05, 0.1, 0.5, 5.48, -5.5, 9999999999999.99, 1e13 - 0.01, 1e13 + 0.5, 0.3 + 0.6]
    doc = {text: [text, 2.0**53, -(2.0**53), 2.0**53 - 1, -0.0, 1e16, 1e-7, 0.1, float("inf"), -(2**63), 2**64 - 1,
                  *edges]}
    assert encoding.json_bytes(doc) == through_the_wire(doc).encode()
    assert encoding.json_bytes(doc) == json.dumps(
        {text: [text, 9007199254740992.0, -9007199254740992.0, 9007199254740991, 0, 1e16, 1e-7, 0.1, None,
                -(2**63), 2**64 - 1, *edges]}, separators=(",", ":"), ensure_ascii=False).encode()


def test_what_is_not_plain_takes_the_round_trip() -> None:
    assert encoding._WRITER.plain_json({"t": (1, 2)}) is None
    assert encoding._WRITER.plain_json({1: "a"}) is None
    assert encoding._WRITER.plain_json({"b": b"x"}) is None
    assert encoding._WRITER.plain_json({"n": 2**64}) is None
    assert encoding._WRITER.plain_json({"n": -(2**63) - 1}) is None
    assert encoding._WRITER.plain_json({"s": "\ud800"}) is None
    deep: Any = []
    for _ in range(300):
        deep = [deep]
    assert encoding._WRITER.plain_json(deep) is None
    assert encoding.dumps({"t": (1, 2.0), "k": {3: 4.0}}) == through_the_wire({"t": (1, 2.0), "k": {3: 4.0}})


def test_other_replies_still_go_through_the_wire_encoder() -> None:
    assert encoding.dumps({"ok": True, "n": 2.0, "x": float("nan"), "l": [1.5, 3.0]}) == (
        '{"ok":true,"n":2,"x":null,"l":[1.5,3]}')
    assert encoding.dumps({"ok": True, "job": {"a": 1.0}}) == '{"ok":true,"job":{"a":1}}'

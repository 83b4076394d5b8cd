"""Error texts that quote a request value write it as JS String() does, in bounded time and length."""
from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bunqueue.errors import MAX_SHOWN_CHARS, not_processing, shown


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("abc", "abc"),
        (None, "null"),
        (True, "true"),
        (3, "3"),
        (2.0, "2"),
        (2.5, "2.5"),
        ([1, [2, 3], None, "x"], "1,2,3,,x"),
        ([], ""),
        ({"a": 1}, "[object Object]"),
        ([{"a": 1}, 1], "[object Object],1"),
        (b"\x01\x02", "1,2"),
    ],
)
def test_values_read_as_js_string(value: Any, text: str) -> None:
    assert shown(value) == text


def test_deep_nesting_costs_no_recursion() -> None:
    value: Any = "x"
    for _ in range(100_000):
        value = [value]
    assert not_processing(value) == "Job not found or not in processing state: x"


def test_long_values_are_cut() -> None:
    assert len(shown("y" * 10_000)) == MAX_SHOWN_CHARS
    assert shown(list(range(100_000))).startswith("0,1,2,")
    assert len(shown(list(range(100_000)))) == MAX_SHOWN_CHARS


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=30,
)


@given(json_values)
def test_never_longer_than_the_cap(value: Any) -> None:
    assert len(shown(value)) <= MAX_SHOWN_CHARS

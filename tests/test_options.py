"""Option values read as JS reads them: Number() of a text, and slice() bounds."""
from __future__ import annotations

import math

import pytest

from bunqueue.options import js_number, js_slice_bounds


@pytest.mark.parametrize(
    ("text", "number"),
    [("12", 12.0), (" 1e3 ", 1000.0), ("0x10", 16.0), ("", 0.0), ("-Infinity", -math.inf),
     ("1_000", math.nan), ("nan", math.nan), ("abc", math.nan), ("-0x10", math.nan)],
)
def test_js_number(text: str, number: float):
    got = js_number(text)
    assert (math.isnan(got) and math.isnan(number)) or got == number


@pytest.mark.parametrize(
    ("start", "end", "length", "bounds"),
    [(0, 2, 5, (0, 2)), (-1, 5, 5, (4, 5)), (1.9, 3.2, 5, (1, 3)), (-9, -2, 5, (0, 3)), (3, 99, 5, (3, 5)),
     (0, math.inf, 5, (0, 5)), (-math.inf, 2, 5, (0, 2))],
)
def test_js_slice_bounds(start: float, end: float, length: int, bounds: tuple[int, int]):
    assert js_slice_bounds(start, end, length) == bounds

"""A number as the text JS's String() gives it, the form listings use for numeric keys."""
from __future__ import annotations

import pytest

from bunqueue.broker.ops.listing import js_number_key


@pytest.mark.parametrize(
    ("value", "key"),
    [(1.0, "1"), (-2.0, "-2"), (1.5, "1.5"), (1.5e-5, "0.000015"), (1e21, "1e+21"), (1e-7, "1e-7"),
     (2.5e-7, "2.5e-7"), (1e20, "100000000000000000000"), (123456789012345680000.0, "123456789012345680000"),
     (0.0, "0"), (-0.0, "0")],
)
def test_js_number_key(value: float, key: str):
    assert js_number_key(value) == key

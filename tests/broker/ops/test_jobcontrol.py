"""Job progress as the original keeps it: a number (or numeric text) clamped to 0-100; anything else is 0,
with its text kept."""
from __future__ import annotations

import math
from typing import Any

import pytest

from bunqueue.broker.ops.jobcontrol import normalize_progress


@pytest.mark.parametrize(
    ("progress", "expected"),
    [(42, (42, None)), (101.5, (100, None)), (-1, (0, None)), (math.nan, (0, None)), (True, (1, None)),
     (None, (0, None)), ("7.5", (7.5, None)), ("", (0, None)), ("half", (0, "half")),
     ({"a": [1]}, (0, '{"a":[1]}')), ([1, 2], (0, "[1,2]"))],
)
def test_normalize_progress(progress: Any, expected: tuple[Any, Any]):
    assert normalize_progress(progress) == expected

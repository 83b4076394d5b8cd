from __future__ import annotations

import pytest

from bunqueue._testbase.inprocess import World


@pytest.fixture
def world() -> World:
    return World()

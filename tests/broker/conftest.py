from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

from inprocess import World


@pytest.fixture
def world() -> World:
    return World()

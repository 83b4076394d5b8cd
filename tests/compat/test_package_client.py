"""The SDK's scenarios (sdk/*.py), unchanged, run by this package's own synchronous client.

Each script runs with this interpreter, where `bunqueue` is this package, against the broker the
compatibility tests start; COMPAT_CLIENT=package tells the shared scenario helper which client to expect.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.compat.brokers import Broker
from tests.compat.runner import run_scenario

SCENARIOS = Path(__file__).parent / "sdk"
PACKAGE = {"COMPAT_CLIENT": "package"}
pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize("scenario", ["add_and_query", "worker_results", "failures", "schedulers", "flows"])
def test_scenario(scenario: str, broker: Broker) -> None:
    run_scenario([sys.executable, f"{scenario}.py"], SCENARIOS, broker, PACKAGE)


def test_auth_with_token(auth_broker: Broker) -> None:
    run_scenario([sys.executable, "auth.py"], SCENARIOS, auth_broker, PACKAGE)

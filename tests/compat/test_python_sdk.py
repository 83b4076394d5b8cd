"""The published Python SDK (`bunqueue-client`), unchanged, against this broker.

Each scenario is a script in sdk/ run by the SDK's own interpreter; see the script for what it checks.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.compat.brokers import Broker
from tests.compat.runner import run_scenario

SCENARIOS = Path(__file__).parent / "sdk"
# A first run installs the SDK into its virtual environment inside the first test.
pytestmark = pytest.mark.timeout(600)


@pytest.mark.parametrize("scenario", ["add_and_query", "worker_results", "failures", "schedulers", "flows"])
def test_scenario(scenario: str, sdk_python: Path, broker: Broker) -> None:
    run_scenario([str(sdk_python), f"{scenario}.py"], SCENARIOS, broker)


def test_auth_with_token(sdk_python: Path, auth_broker: Broker) -> None:
    run_scenario([str(sdk_python), "auth.py"], SCENARIOS, auth_broker)

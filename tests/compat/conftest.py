"""Fixtures for the compatibility tests: the published clients, installed once, and the broker they use."""
from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.compat import brokers, clients


def _installed(ensure: object) -> Path:
    try:
        return ensure()  # type: ignore[operator, no-any-return]
    except clients.ClientUnavailable as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def sdk_python() -> Path:
    return _installed(clients.ensure_sdk)


@pytest.fixture(scope="session")
def bun() -> Path:
    return _installed(clients.ensure_js)


def _reference_bun() -> Path | None:
    # Only the Bun original needs the npm install before a broker can start.
    return _installed(clients.ensure_js) if brokers.target() == "bun" else None


@pytest.fixture(scope="session")
def broker() -> Iterator[brokers.Broker]:
    """One broker for the scenarios; each uses queues of its own."""
    found, proc = brokers.start(_reference_bun())
    yield found
    proc.stop()


@pytest.fixture(scope="session")
def auth_broker() -> Iterator[brokers.Broker]:
    found, proc = brokers.start(_reference_bun(), token=brokers.TOKEN)
    yield found
    proc.stop()

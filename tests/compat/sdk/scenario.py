"""What every SDK scenario script shares: where the broker is, fresh queue names, waiting for a condition.

These scripts run in the SDK's own virtual environment, where `bunqueue` is the published client, and,
with COMPAT_CLIENT=package, unchanged with this project's interpreter, where `bunqueue` is this package and
its synchronous client.
"""
from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from importlib.metadata import version
from importlib.util import find_spec
from typing import Any

import bunqueue

if os.environ.get("COMPAT_CLIENT") == "package":
    # This project's own client: the package that also holds the broker.
    assert find_spec("bunqueue.server") is not None and hasattr(bunqueue, "Worker"), bunqueue.__file__
else:
    # The SDK and the broker share the import name `bunqueue`: make sure the SDK is the one imported here.
    assert version("bunqueue-client") == "0.1.5" and hasattr(bunqueue, "Worker"), bunqueue.__file__


def broker() -> dict[str, Any]:
    """Keyword arguments for the SDK's Queue and Worker, from the environment the test sets."""
    args: dict[str, Any] = {"host": os.environ["COMPAT_HOST"], "port": int(os.environ["COMPAT_PORT"])}
    if os.environ.get("COMPAT_TOKEN"):
        args["token"] = os.environ["COMPAT_TOKEN"]
    return args


def queue_name(label: str) -> str:
    # Scenarios share one broker; a queue of their own keeps their counts exact.
    return f"py-{label}-{uuid.uuid4().hex[:8]}"


def wait_until(what: str, condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.02)

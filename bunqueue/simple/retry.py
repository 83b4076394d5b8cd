"""Retries inside the processor, the job staying active meanwhile (unlike the server's ``attempts``,
which put a failed job back in the queue). Delays are in milliseconds, as in the TS client's retry."""
from __future__ import annotations

import random
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

R = TypeVar("R")

DEFAULT_ATTEMPTS = 3
DEFAULT_DELAY_MS = 1000.0
DEFAULT_STRATEGY = "exponential"


def option(config: Mapping[str, Any], snake: str, camel: str) -> Any:
    """An option by its Python name or the TS client's camelCase one; a false-y value counts as unset."""
    return config.get(snake) or config.get(camel)


def calculate_backoff(strategy: str, attempt: int, base_delay: float, error: BaseException,
                      config: Mapping[str, Any]) -> float:
    """The wait in ms after failed ``attempt`` (1 for the first): ``fixed``, ``exponential`` (doubling),
    ``jitter`` (exponential times 0.5-1.5, whole ms), ``fibonacci`` (base times F(attempt + 1)) or
    ``custom`` (``custom_backoff(attempt, error)``); an unknown strategy waits ``base_delay``."""
    if strategy == "exponential":
        return base_delay * 2 ** (attempt - 1)
    if strategy == "jitter":
        return float(int(base_delay * 2 ** (attempt - 1) * (0.5 + random.random())))
    if strategy == "fibonacci":
        previous, current = 1, 1
        for _ in range(attempt - 1):
            previous, current = current, previous + current
        return base_delay * current
    if strategy == "custom":
        custom = option(config, "custom_backoff", "customBackoff")
        return float(custom(attempt, error)) if custom else base_delay
    return base_delay


def execute_with_retry(fn: Callable[[], R], config: Mapping[str, Any]) -> R:
    """``fn()``, called again after a failure until ``max_attempts`` calls failed or ``retry_if(error,
    attempt)`` says no; the last error is raised."""
    attempts = int(option(config, "max_attempts", "maxAttempts") or DEFAULT_ATTEMPTS)
    base_delay = float(config.get("delay") or DEFAULT_DELAY_MS)
    strategy = str(config.get("strategy") or DEFAULT_STRATEGY)
    retry_if = option(config, "retry_if", "retryIf")
    attempt = 1
    while True:
        try:
            return fn()
        except Exception as error:
            if attempt >= attempts or (retry_if is not None and not retry_if(error, attempt)):
                raise
            time.sleep(calculate_backoff(strategy, attempt, base_delay, error, config) / 1000)
            attempt += 1

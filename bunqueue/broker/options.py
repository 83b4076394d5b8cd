"""Request options that are not job options: one place that checks them and names the field.

Job options (PUSH/PUSHB) are validated in the compiled push path, ``bunqueue._core.jobs``.
"""
from __future__ import annotations

import math
from typing import Any

from bunqueue import errors
from bunqueue._core.jobs import finite_option, validate_queue_name
from bunqueue.errors import CommandError

__all__ = ["finite_option", "queue_name", "strict_number", "optional_string", "flag", "required_string"]

MAX_PULL_TIMEOUT = 60_000
MAX_PULL_COUNT = 1000
DEFAULT_LOCK_TTL = 30_000.0


def queue_name(cmd: dict[str, Any]) -> str:
    name: str = validate_queue_name(cmd.get("queue"))
    return name


def strict_number(cmd: dict[str, Any], field: str, default: float, lo: float, hi: float) -> float:
    """A number sent as a number (not a numeric string), within [lo, hi]."""
    value = cmd.get(field)
    if value is None:
        return default
    if type(value) is bool or not isinstance(value, (int, float)):
        raise CommandError(errors.must_be_number(field))
    if math.isnan(value):
        raise CommandError(errors.must_be_finite(field))
    if value < lo:
        raise CommandError(errors.must_be_at_least(field, lo))
    if value > hi:
        raise CommandError(errors.must_be_at_most(field, hi))
    return float(value)


def optional_string(cmd: dict[str, Any], field: str) -> str | None:
    value = cmd.get(field)
    if value is None:
        return None
    if type(value) is not str:
        raise CommandError(errors.must_be_string(field))
    return value


def required_string(cmd: dict[str, Any], field: str) -> str:
    value = cmd.get(field)
    if type(value) is not str:
        raise CommandError(errors.must_be_string(field))
    return value


def flag(cmd: dict[str, Any], field: str) -> bool:
    value = cmd.get(field)
    if value is None or value is False:
        return False
    if value is True:
        return True
    raise CommandError(errors.must_be_boolean(field))


def string_list(cmd: dict[str, Any], field: str) -> list[str]:
    value = cmd.get(field)
    if type(value) is not list:
        raise CommandError(errors.must_be_array(field))
    return value


def lock_ttl(cmd: dict[str, Any]) -> float:
    ttl = finite_option(cmd, "lockTtl")
    return DEFAULT_LOCK_TTL if ttl is None else ttl

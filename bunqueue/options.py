"""Request options that are not job options: one place that checks them and names the field.

Job options (PUSH/PUSHB) are validated in the compiled push path, ``bunqueue._core.jobfactory``.

A numeric field is one of four kinds, each read by one function here, as the spec pages and the
reference settle it for that field:

- a number, never a numeric string: ``number_arg`` (ExtendLock/ExtendLocks ``duration``, GetJobs and
  GetLogs bounds, WaitJob ``timeout``), ``strict_number`` (PULL/PULLB ``timeout``, ``count``: finite) and
  ``count_arg`` (PromoteJobs, Dlq, RetryDlq ``count``; Clean ``limit``);
- a number or a plain decimal string: ``number_arg(coerce=True)`` (ChangeDelay and MoveToDelayed
  ``delay``, ChangePriority ``priority``, Clean ``grace``) and ``coerce_numeric`` (ClearLogs ``keepLogs``);
- a job option, read as PUSH reads it: ``finite_option`` (``lockTtl``, JobHeartbeat ``duration``, the
  RegisterWorker and Heartbeat counters);
- coerced as JS ``Number()`` does, junk dropped rather than refused: ``js_finite`` (RateLimit and
  SetConcurrency ``limit``, SetStallConfig, GetQueueLimits ``maxJobs``).

Every kind refuses NaN, and the infinities wherever a finite number is needed, before any state changes.
"""
from __future__ import annotations

import math
import re
from typing import Any

from bunqueue import errors
from bunqueue._core.groups import ANY_LANE, NO_LANE, ONE_LANE, GroupClaim
from bunqueue._core.jobfactory import finite_option, flag_option, id_option, validate_queue_name
from bunqueue.errors import CommandError

__all__ = ["finite_option", "flag", "optional_string", "queue_name", "required_string", "strict_number"]

MAX_PULL_TIMEOUT = 60_000
MAX_PULL_COUNT = 1000
DEFAULT_LOCK_TTL = 30_000.0


def queue_name(cmd: dict[str, Any]) -> str:
    name: str = validate_queue_name(cmd.get("queue"))
    return name


def strict_number(cmd: dict[str, Any], field: str, default: float, lo: float, hi: float) -> float:
    """A finite number sent as a number (not a numeric string), within [lo, hi]."""
    value = cmd.get(field)
    if value is None:
        return default
    kind = type(value)
    # The usual case (every PULL) without the general path; NaN and anything out of range take it.
    if (kind is int or kind is float) and lo <= value <= hi:
        return float(value)
    value = number_arg(cmd, field, default, lo=lo, hi=hi)
    assert value is not None
    return value


def optional_string(cmd: dict[str, Any], field: str) -> str | None:
    value = cmd.get(field)
    if value is None:
        return None
    if type(value) is not str:
        raise CommandError(errors.must_be_string(field))
    return value


def optional_object(cmd: dict[str, Any], field: str) -> dict[str, Any] | None:
    value = cmd.get(field)
    if value is None:
        return None
    if type(value) is not dict:
        raise CommandError(errors.must_be_object(field))
    return value


def required_string(cmd: dict[str, Any], field: str) -> str:
    value = cmd.get(field)
    if type(value) is not str:
        raise CommandError(errors.must_be_string(field))
    return value


def flag(cmd: dict[str, Any], field: str) -> bool:
    result: bool = flag_option(cmd, field)
    return result


def optional_id(cmd: dict[str, Any], field: str) -> str | None:
    """An optional job id; empty means none, as the reference reads a falsy id."""
    result: str | None = id_option(cmd, field)
    return result


def string_list(cmd: dict[str, Any], field: str) -> list[str]:
    value = cmd.get(field)
    if type(value) is not list:
        raise CommandError(errors.must_be_array(field))
    return value


def lock_ttl(cmd: dict[str, Any]) -> float:
    ttl = finite_option(cmd, "lockTtl")
    return DEFAULT_LOCK_TTL if ttl is None else ttl


# A plain decimal string (" 3", "-2.5") counts as its number where the spec says a numeric string does;
# "1e3", "0x10" and "Infinity" do not, as in the reference.
_NUMERIC_STRING = re.compile(r"\s*[+-]?\d+(\.\d+)?\s*\Z")


def coerce_numeric(value: Any) -> Any:
    if type(value) is str and _NUMERIC_STRING.match(value):
        return float(value)
    return value


def number_arg(
    cmd: dict[str, Any],
    field: str,
    default: float | None = None,
    *,
    required: bool = False,
    coerce: bool = False,
    finite: bool = True,
    lo: float = -math.inf,
    hi: float = math.inf,
) -> float | None:
    """A numeric command argument within [lo, hi], or ``default`` when absent.

    ``coerce``: a numeric string counts as its number. ``finite=False`` admits the infinities (a cutoff
    or a cap that means "no limit"); NaN is always refused.
    """
    value = cmd.get(field)
    if value is None:
        if required:
            raise CommandError(errors.is_required(field))
        return default
    if coerce:
        value = coerce_numeric(value)
    if type(value) is bool or not isinstance(value, (int, float)):
        raise CommandError(errors.must_be_number(field))
    if math.isnan(value) or (finite and math.isinf(value)):
        raise CommandError(errors.must_be_finite(field))
    if value < lo:
        raise CommandError(errors.must_be_at_least(field, lo))
    if value > hi:
        raise CommandError(errors.must_be_at_most(field, hi))
    return float(value)


def count_arg(cmd: dict[str, Any], field: str, default: float = math.inf, finite: bool = False) -> float:
    """A cap on how many items a command touches: whole, and never below 0 (a negative cap is 0, as the
    reference clamps it). Infinity is no cap unless ``finite``; NaN and non-numbers are refused."""
    value = number_arg(cmd, field, default, finite=finite)
    assert value is not None
    if value == math.inf:
        return value
    # -Infinity is a negative cap like any other: 0, and never handed to floor().
    return float(math.floor(value)) if value > 0 else 0.0


def flag_or(cmd: dict[str, Any], field: str, default: bool) -> bool:
    """A boolean argument; ``default`` when absent."""
    value = cmd.get(field)
    if value is None:
        return default
    if value is True or value is False:
        return value
    raise CommandError(errors.must_be_boolean(field))


def job_id_arg(cmd: dict[str, Any], field: str = "id") -> str:
    """A job id argument. Any other value names no job: the caller answers as for an unknown id."""
    value = cmd.get(field)
    return value if type(value) is str else ""


def js_number(text: str) -> float:
    """``Number(text)`` as JS reads a string: trimmed, empty is 0, hex/octal/binary literals, else NaN."""
    s = text.strip()
    if not s:
        return 0.0
    if "_" in s:
        return math.nan
    lower = s.lower()
    for prefix, base in (("0x", 16), ("0o", 8), ("0b", 2)):
        if lower.startswith(prefix):
            try:
                return float(int(s[2:], base))
            except ValueError:
                return math.nan
    if s in ("Infinity", "+Infinity"):
        return math.inf
    if s == "-Infinity":
        return -math.inf
    if lower.lstrip("+-").startswith(("inf", "nan")):
        return math.nan
    try:
        return float(s)
    except ValueError:
        return math.nan


def js_slice_bounds(start: float, end: float, length: int) -> tuple[int, int]:
    """``Array.prototype.slice`` bounds: truncated toward zero, negative counts from the end, clamped."""

    def bound(value: float) -> int:
        if value < 0:
            return max(0, length + int(max(value, -length - 1.0)))
        return int(min(value, float(length)))

    return bound(start), bound(end)


def js_finite(value: Any) -> float | None:
    """JS ``toFiniteNumber``: a number or a numeric string (as ``Number`` reads it) if finite, else None.

    For arguments the reference coerces rather than validates: RateLimit/SetConcurrency ``limit``, the
    SetStallConfig fields, GetQueueLimits ``maxJobs``.
    """
    if type(value) is bool or value is None:
        return None
    if isinstance(value, (int, float)):
        number = float(value)
    elif type(value) is str:
        number = js_number(value)
    else:
        return None
    return number if math.isfinite(number) else None


MAX_GROUP_ID = 256
MAX_SAFE_INTEGER = 2**53 - 1


def group_id_arg(cmd: dict[str, Any]) -> str:
    """A required group id: a non-empty string of at most 256 characters without NUL (null is not one)."""
    if "groupId" not in cmd:
        raise CommandError(errors.is_required("groupId"))
    value = cmd["groupId"]
    return _group_id(value, "groupId")


def _group_id(value: Any, field: str) -> str:
    if type(value) is not str:
        raise CommandError(errors.must_be_string(field))
    if not value:
        raise CommandError(errors.must_be_non_empty_string(field))
    if len(value) > MAX_GROUP_ID:
        raise CommandError(errors.must_be_at_most_chars(field, MAX_GROUP_ID))
    if "\0" in value:
        raise CommandError(errors.must_not_contain_nul(field))
    return value


def positive_safe_integer(value: Any, field: str) -> int:
    """A number sent as a whole number from 1 through 2^53 - 1 (no numeric strings)."""
    if (
        type(value) is bool
        or not isinstance(value, (int, float))
        or not (1 <= value <= MAX_SAFE_INTEGER)
        or (type(value) is float and not value.is_integer())
    ):
        raise CommandError(errors.must_be_positive_safe_integer(field))
    return int(value)


def group_claim(cmd: dict[str, Any]) -> GroupClaim | None:
    """PULL/PULLB ``group``: the claim defaults and lane affinity, or None when absent.

    Sent as null, ``group``, ``group.concurrency`` and ``group.limit`` are refused as the wrong type, as
    the reference refuses them; only ``group.affinity`` means something as null (ungrouped jobs only).
    """
    if "group" not in cmd:
        return None
    group = cmd["group"]
    if type(group) is not dict:
        raise CommandError(errors.must_be_object("group"))
    lanes, affinity = ANY_LANE, None
    if "affinity" in group:
        affinity = group["affinity"]
        if affinity is None:
            lanes = NO_LANE
        elif type(affinity) is str:
            lanes = ONE_LANE
        else:
            raise CommandError(errors.must_be_string_or_null("group.affinity"))
    concurrency = None
    if "concurrency" in group:
        concurrency = positive_safe_integer(group["concurrency"], "group.concurrency")
    limit_max = limit_duration = 0
    if "limit" in group:
        limit = group["limit"]
        if type(limit) is not dict:
            raise CommandError(errors.must_be_object("group.limit"))
        limit_max = positive_safe_integer(limit.get("max"), "group.limit.max")
        limit_duration = positive_safe_integer(limit.get("duration"), "group.limit.duration")
    if concurrency is None and not limit_max and lanes == ANY_LANE:
        return None
    return GroupClaim(concurrency or 0, limit_max, limit_duration, lanes, affinity)

"""Every wire error text, in one place.

The texts are part of the protocol: clients match on them (the TS worker looks for "not found" and "not in
processing"), so they are written exactly as the reference server sends them and nowhere else.
"""
from __future__ import annotations

from typing import Any

# Wire constants. Each has this one home; the compiled modules take theirs from here (or, where C needs a
# constant at compile time, from ``_core/wire.pxd``, which a unit test holds equal to these).
MAX_FRAME_BYTES = 64 * 1024 * 1024
#: A frame's length header is a uint32.
MAX_FRAME_HEADER = 0xFFFFFFFF
#: msgpackr writes an integral number in [INT32_MIN, UINT32_MAX] as an integer, anything else as float64.
INT32_MIN = -2147483648
UINT32_MAX = 4294967295
#: How deeply a value the broker keeps (job data, a result) may nest: every reply and storage record that
#: carries it must stay within the encoders' depth limits, which sit above this with room to spare.
MAX_VALUE_DEPTH = 500

# Framing and dispatch.
INVALID_COMMAND_FORMAT = "Invalid command format"
INVALID_COMMAND = "Invalid command"
NOT_AUTHENTICATED = "Not authenticated"
INVALID_TOKEN = "Invalid token"
RATE_LIMIT_EXCEEDED = "Rate limit exceeded"
INTERNAL_ERROR = "Internal server error"
INVALID_REQ_ID = "reqId must be a string or a number"
REPLY_NOT_ENCODABLE = "Reply could not be encoded"


def storage_write_failed(reason: str) -> str:
    return f"Storage write failed: {reason}"


def storage_unavailable(reason: str) -> str:
    """A PostgreSQL broker that cannot reach its database: the command had no effect that was acknowledged."""
    return f"Storage unavailable: {reason}"


def storage_timeout(seconds: float) -> str:
    return f"Storage unavailable: no answer within {seconds:g} s"


def unknown_command(cmd: object) -> str:
    return f"Unknown command: {shown(cmd)}"


class FrameTooLarge(ValueError):
    """A frame header declared more bytes than the reader accepts.

    `frames` holds the payloads that were completed earlier in the same chunk, so none is lost.
    """

    def __init__(self, length: int, max_frame: int, frames: list[bytes] | None = None) -> None:
        # All three go to args so that the exception survives pickling (cls(*args)).
        super().__init__(length, max_frame, frames if frames is not None else [])

    @property
    def length(self) -> int:
        return int(self.args[0])

    @property
    def max_frame(self) -> int:
        return int(self.args[1])

    @property
    def frames(self) -> list[bytes]:
        frames: list[bytes] = self.args[2]
        return frames

    def __str__(self) -> str:
        return f"frame of {self.args[0]} bytes exceeds the limit of {self.args[1]} bytes"


class BadFrame(Exception):
    """The frame is not a command: the reply is this error text, without a reqId."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def frame_too_large(length: int) -> str:
    return f"Frame too large: {length} bytes exceeds maximum {MAX_FRAME_BYTES}"


# Queue names.
QUEUE_REQUIRED = "Queue name is required"
QUEUE_TOO_LONG = "Queue name too long (max 256 characters)"
QUEUE_INVALID_CHARS = "Queue name contains invalid characters"
QUEUE_NOT_STRING = "Queue name must be a string"

# Jobs.
JOB_NOT_FOUND = "Job not found"
JOB_NAME_INVALID = "Job name must be a non-empty string of at most 256 characters"
JOB_DATA_TOO_LARGE = "Job data too large (max 10MB)"


#: The longest rendering of a request value that an error text quotes.
MAX_SHOWN_CHARS = 256


def shown(value: Any) -> str:
    """A request value as JS ``String()`` writes it into the reference's texts, cut at MAX_SHOWN_CHARS.

    Arrays join their items with commas (null and undefined as empty), objects are ``[object Object]``.
    Iterative, and it stops once the text is long enough, so no value makes an error path recurse or
    run long, however deep or wide it is.
    """
    if type(value) is str:
        return value[:MAX_SHOWN_CHARS]
    if value is None:
        return "null"
    parts: list[str] = []
    size = 0
    # Items still to render, next on top; _COMMA marks where a comma goes.
    pending: list[Any] = [value]
    while pending and size < MAX_SHOWN_CHARS:
        item = pending.pop()
        if item is _COMMA:
            text = ","
        elif type(item) in (list, tuple):
            pending.extend(_interleave_commas(item))
            continue
        elif item is None:
            text = ""
        elif item is True or item is False:
            text = "true" if item else "false"
        elif type(item) is float and item.is_integer():
            text = str(int(item))
        elif isinstance(item, (bytes, bytearray)):
            text = ",".join(str(b) for b in item[:MAX_SHOWN_CHARS])
        elif isinstance(item, (str, int, float)):
            text = str(item)
        else:
            text = "[object Object]"
        parts.append(text)
        size += len(text)
    return "".join(parts)[:MAX_SHOWN_CHARS]


_COMMA = object()


def _interleave_commas(items: list[Any] | tuple[Any, ...]) -> list[Any]:
    """``items`` reversed (for a stack) with a comma marker between neighbours."""
    out: list[Any] = []
    for i, item in enumerate(reversed(items[:MAX_SHOWN_CHARS])):
        if i:
            out.append(_COMMA)
        out.append(item)
    return out


def not_processing(job_id: object) -> str:
    return f"Job not found or not in processing state: {shown(job_id)}"


def dependency_not_found(job_id: str) -> str:
    return f"Dependency job not found: {shown(job_id)}"


def cannot_depend_on_itself(job_id: str) -> str:
    return f"Job cannot depend on itself: {shown(job_id)}"


def lock_token_required(job_id: str) -> str:
    return f"Lock token required for job {shown(job_id)}"


def invalid_lock_token(job_id: str) -> str:
    return f"Invalid or expired lock token for job {shown(job_id)}"


def batch_item(index: int, message: str) -> str:
    return f"jobs[{index}]: {message}"


def group_full(group_id: str, limit: int) -> str:
    return f"Group {shown(group_id)} has reached its maximum size of {limit}"


ACKB_TOKENS_LENGTH = "ACKB tokens length must match ids length"
ACKB_RESULTS_LENGTH = "ACKB results length must match ids length"

# Field rules: "<field> must be ...". The field name is always the wire name.


def must_be_number(field: str) -> str:
    return f"{field} must be a number"


def must_be_finite(field: str) -> str:
    return f"{field} must be a finite number"


def _bound(value: object) -> object:
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def must_be_at_least(field: str, bound: object) -> str:
    return f"{field} must be at least {_bound(bound)}"


def must_be_at_most(field: str, bound: object) -> str:
    return f"{field} must be at most {_bound(bound)}"


def must_be_integer(field: str) -> str:
    return f"{field} must be an integer"


def must_be_string(field: str) -> str:
    return f"{field} must be a string"


def must_be_boolean(field: str) -> str:
    return f"{field} must be a boolean"


def must_be_array(field: str) -> str:
    return f"{field} must be an array"


def must_be_string_array(field: str) -> str:
    return f"{field} must be an array of strings"


def must_be_object(field: str) -> str:
    return f"{field} must be an object"


def must_be_at_most_chars(field: str, limit: int) -> str:
    return f"{field} must be at most {limit} characters"


def must_be_non_empty_string(field: str) -> str:
    return f"{field} must be a non-empty string"


def must_be_positive_safe_integer(field: str) -> str:
    return f"{field} must be a positive safe integer"


def must_not_contain_nul(field: str) -> str:
    return f"{field} must not contain NUL characters"


def must_be_string_or_null(field: str) -> str:
    return f"{field} must be a string or null"


MAX_TAG_CHARS = 256
TAGS_INVALID = f"tags must be an array of strings of at most {MAX_TAG_CHARS} characters"
GROUP_PRIORITY_RANGE = "group.priority must be between 0 and 2097151"
GROUP_PRIORITY_INTEGER = "group.priority must be an integer"
GROUP_MAX_SIZE = "group.maxSize must be a positive safe integer"
REPEAT_SHAPE = "repeat requires exactly one of every or pattern"
REPEAT_EVERY = "repeat.every must be a positive finite number"

# Job and queue management (control, DLQ, logs).
CANNOT_CANCEL = "Job not found or cannot be cancelled"
CANNOT_UPDATE = "Job not found or cannot be updated"
NOT_IN_QUEUE = "Job not found or not in queue"
NOT_DELAYED = "Job not found or not delayed"
CANNOT_CHANGE_DELAY = "Job not found or cannot change delay"
NOT_ACTIVE = "Job not found or not active"
FAILED_NOT_IN_DLQ = "Failed job not in DLQ"
FLOW_DATA_NOT_OBJECT = "flow job data must be an object"
# An HTTP request body that is not a JSON object.
INVALID_JSON_BODY = "Invalid JSON body"


def nested_too_deeply(field: str) -> str:
    return f"{field} must not be nested more than {MAX_VALUE_DEPTH} levels deep"


def is_required(field: str) -> str:
    return f"{field} is required"


def not_active(state: str) -> str:
    return f"Job is not active (current state: {state})"


def cannot_move_to_wait(state: str) -> str:
    return f"Cannot move job from state '{state}' to waiting"


def flow_key_reserved(key: str) -> str:
    return f"flow job data key is reserved: {shown(key)}"


# Flows: PUSHF graph validation and the flow dependency commands.
FLOW_JOBS_NOT_ARRAY = "flow jobs must be an array"
FLOW_TOO_MANY_JOBS = "flow exceeds the 10000 job limit"
FLOW_ID_NOT_STRING = "flow job id must be a string"
FLOW_ID_INVALID = "flow job id is invalid or is not well-formed Unicode"
FLOW_ID_COLON = "flow job id cannot contain a colon"
FLOW_DATA_TOO_LARGE = "flow data is too large (max 64MB per atomic batch)"
FLOW_REPEAT = "repeat is not supported inside an atomic flow"
FLOW_DEDUP = "deduplication is not supported inside an atomic flow"
FLOW_DEBOUNCE = "debounce is not supported inside an atomic flow"
FLOW_POLICIES_EXCLUSIVE = "flow failure policies are mutually exclusive"
FLOW_POLICY_NEEDS_PARENT = "a flow failure policy requires a parent"
FLOW_CYCLE = "flow contains a dependency cycle"
FLOW_OWN_PARENT = "A flow job cannot be its own parent"
JOB_OWN_PARENT = "A job cannot be its own parent"
MOVE_NOT_ACTIVE = "Job is not active"
CHILD_FAILED_DEFAULT = "unknown error"
# The error a child that was already in the DLQ without one passes to its policy when UpdateParent links it.
CHILD_FAILED_UNRECORDED = "Child job failed"


def flow_item_not_object(index: int) -> str:
    return f"flow jobs[{index}] must be an object"


def flow_duplicate_id(job_id: str) -> str:
    return f"duplicate flow job id: {shown(job_id)}"


def flow_invalid_queue(queue: Any) -> str:
    return f"invalid flow queue: {shown(queue)}"


def flow_input_invalid(job_id: str) -> str:
    return f"flow job input is invalid: {shown(job_id)}"


def flow_custom_id_mismatch(job_id: str) -> str:
    return f"custom id does not match planned id: {shown(job_id)}"


def flow_parent_id_invalid(job_id: str) -> str:
    return f"flow parent id is invalid: {shown(job_id)}"


def flow_id_list_invalid(field: str) -> str:
    return f"{field} must be an array of valid string job ids"


def flow_duplicate_dependency(job_id: str) -> str:
    return f"duplicate dependency in flow job: {shown(job_id)}"


def flow_duplicate_child(job_id: str) -> str:
    return f"duplicate child in flow job: {shown(job_id)}"


def flow_dependency_not_found(job_id: str) -> str:
    return f"flow dependency not found: {shown(job_id)}"


def flow_self_dependency(job_id: str) -> str:
    return f"flow job cannot depend on itself: {shown(job_id)}"


def flow_child_not_dependency(child_id: str) -> str:
    return f"flow child is missing from dependencies: {shown(child_id)}"


def flow_child_not_found(child_id: str) -> str:
    return f"flow child not found: {shown(child_id)}"


def flow_child_not_pointing_back(child_id: str, parent_id: str) -> str:
    return f"flow child {shown(child_id)} does not point back to parent {shown(parent_id)}"


def flow_parent_not_found(parent_id: str) -> str:
    return f"flow parent not found: {shown(parent_id)}"


def flow_parent_not_owner(parent_id: str, child_id: str) -> str:
    return f"flow parent {shown(parent_id)} does not own child {shown(child_id)}"


def flow_child_metadata(child_id: str, parent_id: str) -> str:
    return f"flow child {shown(child_id)} metadata does not match parent {shown(parent_id)}"


def flow_children_mismatch(parent_id: str) -> str:
    return f"flow parent {shown(parent_id)} children does not match the canonical flow topology"


def flow_job_exists(job_id: str) -> str:
    return f"Flow job {shown(job_id)} already exists"


def child_not_found(job_id: Any) -> str:
    return f"Child job not found: {shown(job_id)}"


def parent_not_found(job_id: Any) -> str:
    return f"Parent job not found: {shown(job_id)}"


def parent_not_linkable(job_id: str) -> str:
    return f"Parent job {shown(job_id)} is not linkable"


def parent_in_other_queue(parent_id: str, queue: str, expected: str) -> str:
    return f"Parent job {shown(parent_id)} belongs to queue {shown(queue)}, not {shown(expected)}"


def child_owned_elsewhere(child_id: str, owner: str) -> str:
    return f"Child job {shown(child_id)} already belongs to parent {shown(owner)}"


def child_failed(child_id: str, error: Any) -> str:
    return f"Child job {shown(child_id)} failed: {shown(error)}"


def job_not_found(job_id: Any) -> str:
    return f"Job not found: {shown(job_id)}"


def job_has_no_parent(job_id: str) -> str:
    return f"Job {shown(job_id)} has no parent"


def must_be_string_or_array(field: str) -> str:
    return f"{field} must be a string or an array of strings"


# Locks, liveness, limits, deduplication and workers.
LOCK_NOT_FOUND = "Lock not found or invalid token"
JOB_NOT_ACTIVE = "Job not found or not active (or invalid token)"
WORKER_NOT_FOUND = "Worker not found"
DEDUP_EXTENDED = "Duplicate unique_key (extended TTL)"
# Failure texts recorded on jobs and DLQ entries when the broker, not a worker, ends an attempt.
JOB_TIMEOUT_EXCEEDED = "Job timeout exceeded"
STALLED = "stalled"
LOCK_EXPIRED = "Lock expired"


def item_error(field: str, index: int, message: str) -> str:
    """An error about one entry of an array argument: ``durations[1]: duration must be ...``."""
    return f"{field}[{index}]: {message}"


def dedup_replace_blocked(job_id: str) -> str:
    return f"Cannot replace deduplicated job {shown(job_id)} because live jobs depend on it"


def stalled_at_max_attempts(max_attempts: int) -> str:
    return f"Job stalled at max attempts ({max_attempts})"


def stalled_times(count: int) -> str:
    return f"Job stalled {count} times"


def lock_expired_at_max_attempts(max_attempts: int) -> str:
    return f"Lock expired at max attempts ({max_attempts})"


# Crons and repeating jobs.
CRON_NOT_FOUND = "Cron job not found"
CRON_NEEDS_TIMING = "Cron job must have either schedule or repeatEvery"
CRON_REPEAT_EVERY = "Cron repeatEvery must be a positive safe integer number of milliseconds"
CRON_FIELD_COUNT = "Cron expression must have 5 fields, or 6 fields with leading seconds"
CRON_NO_FUTURE = "Cron expression has no future occurrences"
# A macro the reference does not know, in the words of Bun's cron parser, which says "Invalid cron
# expression: " itself: the reference puts its own prefix in front, so the wire text carries it twice.
CRON_SYNTAX = "Invalid cron expression: unrecognized field syntax"
# A field's refusals. The reference words the leading seconds field's itself and passes on the bare words
# of Bun's parser for the calendar fields ("value out of range for field", naming neither); the calendar
# fields are worded here as the reference words the seconds field, with the field and its bounds.
SECONDS_EMPTY_ENTRY = "list entries cannot be empty"
SECONDS_STEP_RANGE = "step must be between 1 and 60"
SECONDS_STEP_BASE = "steps require a wildcard or range"
SECONDS_VALUE_RANGE = "values must be between 0 and 59"
SECONDS_RANGE_ORDER = "range start must not exceed range end"
CRON_STEP_RANGE = "step must be a whole number between 1 and 127"
TIMEZONE_NOT_STRING = "Bun.cron: options.tz must be a string"
REPEAT_WITH_JOB_ID = "repeat jobs cannot use JobOptions.jobId; use repeat.jobId instead"
REPEAT_WITH_RELATIONS = "repeat jobs cannot participate in parent or dependency relationships"


def job_option(message: str) -> str:
    """A cron's jobOptions member refused: ``jobOptions.timeout must be at least 0``."""
    return f"jobOptions.{message}"


def invalid_cron(reason: str) -> str:
    return f"Invalid cron expression: {reason}"


def invalid_repeat_pattern(reason: str) -> str:
    """A repeat.pattern refused; ``reason`` is the text after ``Invalid cron expression: ``."""
    return f"Invalid repeat pattern: {reason}"


def cron_field(name: str, field: str, reason: str) -> str:
    """A field refused: ``Invalid cron seconds field "61": values must be between 0 and 59``."""
    return f'Invalid cron {name} field "{shown(field)}": {reason}'


def cron_values(low: int, high: int, names: str | None) -> str:
    """What a calendar field's values may be: ``values must be between 1 and 12 or JAN-DEC``."""
    return f"values must be between {low} and {high}" + (f" or {names}" if names else "")


def seconds_segment(segment: str) -> str:
    return f'invalid segment "{shown(segment)}"'


def seconds_range(base: str) -> str:
    return f'invalid range "{shown(base)}"'


def seconds_not_integer(label: str) -> str:
    """``label``: ``step``, ``range start``, ``range end`` or ``value``."""
    return f"{label} must be an integer"


def unknown_timezone(name: str) -> str:
    # The reference passes Bun's own message on, library name and all.
    return f"Bun.cron: unknown time zone '{shown(name)}'"


def repeat_timestamp(field: str) -> str:
    return f"repeat.{field} must be a finite timestamp"


class CommandError(Exception):
    """A command failed with a wire error text; the server answers ``{ok: false, error}``."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# -- monitoring and webhooks ------------------------------------------------------------------------
METRICS_QUEUE_REQUIRED = "Metrics queue is required"
METRICS_TYPE = "Metrics type must be 'completed' or 'failed'"
WEBHOOK_NOT_FOUND = "Webhook not found"
WEBHOOK_URL_REQUIRED = "Webhook URL is required"
WEBHOOK_URL_TOO_LONG = "Webhook URL too long (max 2048 characters)"
WEBHOOK_URL_INVALID = "Invalid URL format"
WEBHOOK_URL_SCHEME = "Webhook URL must use http or https protocol"
WEBHOOK_URL_LOCALHOST = "Webhook URL cannot point to localhost"
WEBHOOK_URL_PRIVATE = "Webhook URL cannot point to private IP"
WEBHOOK_URL_PRIVATE_ULA = "Webhook URL cannot point to private (ULA) IP"
WEBHOOK_URL_LINK_LOCAL = "Webhook URL cannot point to link-local IP"
WEBHOOK_URL_UNSPECIFIED = "Webhook URL cannot point to unspecified IP"
WEBHOOK_URL_LOOPBACK = "Webhook URL cannot point to loopback IP"
WEBHOOK_URL_METADATA = "Webhook URL cannot point to cloud metadata endpoints"


def non_negative_safe_integer(field: str) -> str:
    return f"{field} must be a non-negative safe integer"


def invalid_webhook_events(invalid: list[Any], valid: tuple[str, ...]) -> str:
    """The unknown members as JS ``Array.join`` writes each (null as empty, a string as itself)."""
    named = ", ".join(item if type(item) is str else shown([item]) for item in invalid)
    return f"Invalid webhook event(s): {named}. Valid: {', '.join(valid)}"


EVENTS_NOT_EMPTY_ARRAY = "events must be a non-empty array"
# A flow child's failure as `flow:failed` names it when the attempt gave no error.
MAX_ATTEMPTS_EXCEEDED = "Max attempts exceeded"


def invalid_subscriptions(invalid: list[Any]) -> str:
    """A WebSocket Subscribe naming events outside the fixed set, joined as JS ``Array.join`` writes them."""
    return "Invalid: " + ", ".join(item if type(item) is str else shown([item]) for item in invalid)


# -- the Python client (bunqueue.Queue, bunqueue.asyncio, ...) ---------------------------------------
# The names of the published synchronous SDK, so a program written for it catches the same exceptions.
# The client raises ``RemoteCommandError`` for an ``{ok: false}`` reply: it is both the SDK's
# ``BunqueueError`` and this module's ``CommandError``, whose text is the server's error.


class BunqueueError(Exception):
    """Base class of the errors the client raises."""


class RemoteCommandError(BunqueueError, CommandError):
    """The server answered ``{ok: false, error}``; ``str(exc)`` is the error text."""


class AuthenticationError(BunqueueError):
    """The server refused the ``Auth`` token."""


AuthError = AuthenticationError


class ProtocolError(BunqueueError, ConnectionError):
    """The server sent a frame that cannot be decoded; the connection is dropped."""


class ConnectionClosedError(BunqueueError, ConnectionError):
    """The connection is closed, or was lost before the reply arrived."""


class CommandTimeoutError(BunqueueError, TimeoutError):
    """No reply within the command timeout."""


class SerializationError(BunqueueError):
    """A command cannot be packed as MessagePack within the frame limit; nothing was sent."""


class UnrecoverableError(BunqueueError):
    """Raised by a processor: the job fails at once, without its remaining attempts."""


CLIENT_CLOSED = "client is closed"
BLOCKING_ON_LOOP = "a blocking client call cannot run on the client's own event-loop thread"

# MCP server: the tool error texts of the original's bunqueue-mcp.
MCP_JOB_NOT_FOUND = JOB_NOT_FOUND
MCP_CRON_NOT_FOUND = "Cron not found"
MCP_FLOW_NOT_FOUND = "Flow not found"
MCP_UNKNOWN_TOOL = "Tool {name} not found"
MCP_INVALID_ARGUMENTS = "Input validation error: Invalid arguments for tool {name}: {issues}"
MCP_EXPECTED = "Invalid input: expected {expected}, received {received} at {path}"
MCP_BAD_OPTION = "Invalid option: expected one of {options} at {path}"
MCP_TOO_SMALL_NUMBER = "Too small: expected number to be >={limit} at {path}"
MCP_TOO_BIG_NUMBER = "Too big: expected number to be <={limit} at {path}"
MCP_TOO_FEW_ITEMS = "Too small: expected array to have >={limit} items at {path}"
MCP_INVALID_URL = "Invalid URL at {path}"
MCP_NO_DATA = ("Failed to gather bunqueue data: {error}\n\n"
               "The server may be unreachable. Check connectivity and try again.")

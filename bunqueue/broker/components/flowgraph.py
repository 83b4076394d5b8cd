"""PUSHF graph validation: the whole graph is checked before anything is built or published.

A graph is a list of ``{id, queue, input}`` items. Every id is final (the client planned it), edges are
given twice (a parent's ``childrenIds``/``dependsOn`` and each child's ``parentId``, plus the flow
metadata the clients keep in ``data``), and every dependency must be a member of the same graph. The
checks run in O(jobs + edges); the first violation is the reply.
"""
from __future__ import annotations

import json
from typing import Any, NamedTuple

from bunqueue import errors
from bunqueue._core.jobfactory import validate_queue_name
from bunqueue.errors import CommandError

MAX_FLOW_JOBS = 10_000
MAX_ID_CHARS = 1024
MAX_JOB_DATA_CHARS = 10 * 1024 * 1024
MAX_FLOW_DATA_CHARS = 64 * 1024 * 1024
POLICIES = ("failParentOnFailure", "removeDependencyOnFailure", "continueParentOnFailure",
            "ignoreDependencyOnFailure")
# Options that are refused, or checked for conflicts, only when present: most members name none of them.
_SCREENED = frozenset(("repeat", "uniqueKey", "dedup", "debounceId", "debounceTtl", *POLICIES))


_NONE: frozenset[str] = frozenset()


class Planned(NamedTuple):
    """One validated graph member."""

    id: str
    queue: str
    input: dict[str, Any]
    depends_on: list[str]
    children: list[str]
    parent_id: str | None


def validate(items: Any, measure: bool) -> list[Planned]:
    """The graph's members in request order, or CommandError naming the first violation.

    ``measure``: the frame was large enough that a payload may exceed the size limits (a smaller frame
    cannot hold one, so the JSON measurement is skipped).
    """
    if type(items) is not list:
        raise CommandError(errors.FLOW_JOBS_NOT_ARRAY)
    if len(items) > MAX_FLOW_JOBS:
        raise CommandError(errors.FLOW_TOO_MANY_JOBS)
    planned: list[Planned] = []
    seen: set[str] = set()
    total = 0
    for index, item in enumerate(items):
        member = _member(index, item, seen)
        total += _check_input(member.input, measure)
        if total > MAX_FLOW_DATA_CHARS:
            raise CommandError(errors.FLOW_DATA_TOO_LARGE)
        planned.append(member)
    _check_topology(planned)
    return planned


def _member(index: int, item: Any, seen: set[str]) -> Planned:
    if type(item) is not dict:
        raise CommandError(errors.flow_item_not_object(index))
    job_id = item.get("id")
    if type(job_id) is not str:
        raise CommandError(errors.FLOW_ID_NOT_STRING)
    if not job_id or len(job_id) > MAX_ID_CHARS:
        raise CommandError(errors.FLOW_ID_INVALID)
    if ":" in job_id:
        raise CommandError(errors.FLOW_ID_COLON)
    if job_id in seen:
        raise CommandError(errors.flow_duplicate_id(job_id))
    seen.add(job_id)
    try:
        queue: str = validate_queue_name(item.get("queue"))
    except CommandError:
        raise CommandError(errors.flow_invalid_queue(item.get("queue"))) from None
    opts = item.get("input")
    if type(opts) is not dict:
        raise CommandError(errors.flow_input_invalid(job_id))
    custom_id = opts.get("customId")
    if custom_id is not None and custom_id != job_id:
        raise CommandError(errors.flow_custom_id_mismatch(job_id))
    parent_id = opts.get("parentId")
    if parent_id is not None and (type(parent_id) is not str or not parent_id):
        raise CommandError(errors.flow_parent_id_invalid(job_id))
    depends_on = _id_list(opts, "dependsOn")
    children = _id_list(opts, "childrenIds")
    return Planned(job_id, queue, opts, depends_on, children, parent_id)


def _id_list(opts: dict[str, Any], field: str) -> list[str]:
    value = opts.get(field)
    if value is None:
        return []
    if type(value) is not list or any(
        type(item) is not str or not item or len(item) > MAX_ID_CHARS for item in value
    ):
        raise CommandError(errors.flow_id_list_invalid(field))
    return value


def _check_input(opts: dict[str, Any], measure: bool) -> int:
    """Name, data and the options a flow refuses; the data's JSON length when measured."""
    name = opts.get("name")
    if name is not None and (type(name) is not str or not name or len(name) > 256):
        raise CommandError(errors.JOB_NAME_INVALID)
    data = opts.get("data")
    if type(data) is not dict:
        raise CommandError(errors.FLOW_DATA_NOT_OBJECT)
    size = _json_length(data) if measure else 0
    if size > MAX_JOB_DATA_CHARS:
        raise CommandError(errors.JOB_DATA_TOO_LARGE)
    if not _SCREENED.isdisjoint(opts):
        _check_screened(opts)
    return size


def _check_screened(opts: dict[str, Any]) -> None:
    if opts.get("repeat") is not None:
        raise CommandError(errors.FLOW_REPEAT)
    if opts.get("uniqueKey") is not None or opts.get("dedup") is not None:
        raise CommandError(errors.FLOW_DEDUP)
    if opts.get("debounceId") is not None or opts.get("debounceTtl") is not None:
        raise CommandError(errors.FLOW_DEBOUNCE)
    chosen = 0
    for policy in POLICIES:
        value = opts.get(policy)
        if value is not None and type(value) is not bool:
            raise CommandError(errors.must_be_boolean(policy))
        chosen += value is True
    if chosen > 1:
        raise CommandError(errors.FLOW_POLICIES_EXCLUSIVE)
    if chosen and not opts.get("parentId"):
        raise CommandError(errors.FLOW_POLICY_NEEDS_PARENT)


def _json_length(data: Any) -> int:
    try:
        return len(json.dumps(data, ensure_ascii=False, separators=(",", ":"), default=_bytes_as_list))
    except (TypeError, ValueError):
        return 0


def _bytes_as_list(value: Any) -> Any:
    return list(value) if isinstance(value, (bytes, bytearray)) else None


def _check_topology(planned: list[Planned]) -> None:
    """Edges present, symmetric and consistent with the flow metadata in data; no cycle."""
    by_id = {member.id: member for member in planned}
    for member in planned:
        job_id = member.id
        deps = set(member.depends_on) if member.depends_on else _NONE
        if len(deps) != len(member.depends_on):
            raise CommandError(errors.flow_duplicate_dependency(job_id))
        if member.children and len(set(member.children)) != len(member.children):
            raise CommandError(errors.flow_duplicate_child(job_id))
        for dep in member.depends_on:
            if dep not in by_id:
                raise CommandError(errors.flow_dependency_not_found(dep))
            if dep == job_id:
                raise CommandError(errors.flow_self_dependency(job_id))
        for child_id in member.children:
            if child_id not in deps:
                raise CommandError(errors.flow_child_not_dependency(child_id))
            if by_id[child_id].parent_id != job_id:
                raise CommandError(errors.flow_child_not_pointing_back(child_id, job_id))
        data = member.input["data"]
        parent_id = member.parent_id
        if parent_id is not None:
            parent = by_id.get(parent_id)
            if parent is None:
                raise CommandError(errors.flow_parent_not_found(parent_id))
            if job_id not in parent.children:
                raise CommandError(errors.flow_parent_not_owner(parent_id, job_id))
            if data.get("__parentId") != parent_id or data.get("__parentQueue") != parent.queue:
                raise CommandError(errors.flow_child_metadata(job_id, parent_id))
        if member.children and data.get("__childrenIds") != member.children:
            raise CommandError(errors.flow_children_mismatch(job_id))
    _check_acyclic(planned)


def _check_acyclic(planned: list[Planned]) -> None:
    """Peel off members whose dependencies are all peeled (Kahn's order); any left over form a cycle."""
    unmet = {member.id: len(member.depends_on) for member in planned if member.depends_on}
    if not unmet:
        return
    dependents: dict[str, list[str]] = {}
    for member in planned:
        for dep in member.depends_on:
            dependents.setdefault(dep, []).append(member.id)
    ready = [member.id for member in planned if not member.depends_on]
    peeled = 0
    while ready:
        job_id = ready.pop()
        peeled += 1
        for dependent in dependents.get(job_id, _NONE):
            unmet[dependent] -= 1
            if unmet[dependent] == 0:
                ready.append(dependent)
    if peeled != len(planned):
        raise CommandError(errors.FLOW_CYCLE)

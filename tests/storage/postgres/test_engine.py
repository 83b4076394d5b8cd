"""``PostgresEngine`` is one class made of a mixin per family: no two families may define the same name, or
one would silently take the other's place."""
from __future__ import annotations

from collections import defaultdict

from bunqueue.storage.postgres.engine import PostgresEngine

# Declared by more than one family on purpose: the state they share.
SHARED = {"hot", "pool", "namespace", "clock", "page_results"}
# Hooks of the job family that one family takes up (the families come before PostgresJobs in the bases).
HOOKS = {"failed_for_good"}


def test_no_two_families_define_the_same_name() -> None:
    owners: dict[str, list[str]] = defaultdict(list)
    for family in PostgresEngine.__mro__[1:]:
        if family.__module__.startswith("bunqueue.storage.postgres"):
            for name in vars(family):
                if not name.startswith("__") and name not in SHARED:
                    owners[name].append(family.__name__)
    twice = {name: found for name, found in owners.items() if len(found) > 1}
    hooks = {name: twice.pop(name) for name in HOOKS if name in twice}
    assert twice == {}
    assert all(found[-1] == "PostgresJobs" and len(found) == 2 for found in hooks.values()), hooks

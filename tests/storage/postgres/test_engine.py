"""``PostgresEngine`` is one class made of a mixin per family: no two families may define the same name, or
one would silently take the other's place."""
from __future__ import annotations

from collections import defaultdict

from bunqueue.storage.postgres.engine import PostgresEngine

# Declared by more than one family on purpose: the state they share.
SHARED = {"hot", "pool", "namespace", "clock", "page_results"}


def test_no_two_families_define_the_same_name() -> None:
    owners: dict[str, list[str]] = defaultdict(list)
    for family in PostgresEngine.__mro__[1:]:
        if family.__module__.startswith("bunqueue.storage.postgres"):
            for name in vars(family):
                if not name.startswith("__") and name not in SHARED:
                    owners[name].append(family.__name__)
    assert {name: found for name, found in owners.items() if len(found) > 1} == {}

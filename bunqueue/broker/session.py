"""What the broker knows of a client: an identity and the jobs it holds. Nothing of sockets."""
from __future__ import annotations

import itertools
import uuid
from collections.abc import Callable
from typing import Any

_ids = itertools.count(1)


class Session:
    """One client connection as the broker sees it.

    ``held`` is the set of active jobs this client pulled without ``detach``; each such job points at this
    very set (``Job.holder``), so completing a job and closing a connection both cost O(1) per job.
    """

    __slots__ = ("authenticated", "deliver", "frame_size", "held", "identity", "key", "order", "subscribed", "waiting")

    def __init__(self, authenticated: bool = True) -> None:
        self.key = next(_ids)
        self.authenticated = authenticated
        # Size of the frame being handled: large frames are the only ones whose job data can be too large.
        self.frame_size = 0
        self.held: set[str] = set()
        # Long-poll commands of this client that are waiting now.
        self.waiting = 0
        # The queue whose events this client subscribed to, and how an event frame reaches it (set by
        # the server: the broker only calls it).
        self.subscribed: str | None = None
        self.deliver: Callable[[dict[str, Any]], None] | None = None
        # The clientId events name this client by, made when an event first needs it.
        self.identity: str | None = None
        # An engine's per-connection ordering state (the PostgreSQL server's ``CommandOrder``), made when the
        # first command needs it.
        self.order: Any = None

    def client_id(self) -> str:
        if self.identity is None:
            self.identity = str(uuid.uuid4())
        return self.identity

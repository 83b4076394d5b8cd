"""The facade: ``Broker``, what the command layer, the servers and the tests hold."""
from __future__ import annotations

from bunqueue.broker.wiring import Wiring


class Broker(Wiring):
    pass

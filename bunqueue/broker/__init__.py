"""Commands to state changes. Knows nothing of sockets."""
from bunqueue.broker import states
from bunqueue.broker.broker import Broker
from bunqueue.broker.dispatch import HANDLERS
from bunqueue.broker.session import Session

__all__ = ["HANDLERS", "Broker", "Session", "states"]

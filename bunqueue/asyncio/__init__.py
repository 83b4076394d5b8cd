"""The asyncio client: ``Queue``, ``Worker``, ``QueueEvents``, ``FlowProducer`` and ``Job``.

The same names and arguments as the synchronous ``bunqueue.Queue`` and friends, with coroutines in place
of blocking calls. Every class takes ``embedded=True`` (and ``data_path``) to use a broker inside this
process instead of a server.
"""
from __future__ import annotations

from bunqueue.asyncio.emitter import EventEmitter
from bunqueue.asyncio.flow import FlowNode, FlowProducer
from bunqueue.asyncio.job import Job
from bunqueue.asyncio.queue import Queue
from bunqueue.asyncio.queueevents import QueueEvents
from bunqueue.asyncio.worker import Worker

__all__ = ("EventEmitter", "FlowNode", "FlowProducer", "Job", "Queue", "QueueEvents", "Worker")

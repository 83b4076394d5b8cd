"""The synchronous client, a drop-in for the published ``bunqueue-client`` SDK: ``from bunqueue import
Queue, Worker, Job, FlowProducer, QueueEvents``. Each blocking call runs the asyncio client
(``bunqueue.asyncio``) on one background event-loop thread shared by the process."""
from __future__ import annotations

from bunqueue.asyncio.emitter import EventEmitter
from bunqueue.sdk.flow import FlowNode, FlowProducer
from bunqueue.sdk.job import Job
from bunqueue.sdk.queue import Queue
from bunqueue.sdk.queueevents import QueueEvents
from bunqueue.sdk.sharedconnection import Connection
from bunqueue.sdk.telemetry import TelemetryEvent, TelemetryHandler
from bunqueue.sdk.worker import Worker

__all__ = (
    "Connection", "EventEmitter", "FlowNode", "FlowProducer", "Job", "Queue", "QueueEvents",
    "TelemetryEvent", "TelemetryHandler", "Worker",
)

"""bunqueue: a job-queue broker that speaks the bunqueue wire protocol."""

__version__ = "0.1.0"

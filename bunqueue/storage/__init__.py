"""Where the broker's state is kept: one small interface, several backends."""
from bunqueue.storage.base import MemoryStore, Store, job_added_hook

__all__ = ["MemoryStore", "Store", "job_added_hook"]

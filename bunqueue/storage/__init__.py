"""Where the broker's state is kept: one small interface, several backends."""
from bunqueue.storage.base import MemoryStore, Store, notice_hook

__all__ = ["MemoryStore", "Store", "notice_hook"]

"""Ready queue: an indexed 4-ary heap of job ids ordered by priority, LIFO flag, run_at and seq."""
from libc.math cimport isnan
from libc.stdint cimport uint32_t, uint64_t

from bunqueue._core.heap cimport INITIAL_CAPACITY, fill_hole, restore, sift_up


cdef inline int check_key(double priority, double run_at) except -1:
    if isnan(priority) or isnan(run_at):
        raise ValueError("priority and run_at must not be NaN")
    return 0


cdef class ReadyQueue(IndexedHeap):
    """Job ids ordered for pulling, with O(log n) push, pop, remove and update by id."""

    def __cinit__(self):
        self._entry_size = sizeof(ReadyEntry)
        self._kind = "ready queue"
        self._reserve(INITIAL_CAPACITY)

    def push(self, str job_id not None, double priority, bint lifo, double run_at, uint64_t seq):
        """Queue `job_id`; KeyError if it is already queued."""
        self.add(job_id, priority, lifo, run_at, seq)

    cdef int add(self, str job_id, double priority, bint lifo, double run_at, uint64_t seq) except -1:
        cdef Py_ssize_t slot
        cdef ReadyEntry* entry
        if job_id is None:
            raise TypeError("job_id must be a str")
        check_key(priority, run_at)
        self._reserve(self._size + 1)
        slot = self._claim_slot(job_id)
        if slot < 0:
            raise KeyError(job_id)
        entry = &(<ReadyEntry*>self._entries)[self._size]
        entry.priority = priority
        entry.run_at = run_at
        entry.seq = seq
        entry.slot = <uint32_t>slot
        entry.lifo = lifo
        self._size += 1
        sift_up(<ReadyEntry*>self._entries, self._position_of_slot, self._size - 1)
        return 0

    cpdef object pop(self):
        """Remove and return the best job id, or None when empty."""
        if self._size == 0:
            return None
        return self._remove_at(0)

    def peek(self):
        """The best job id without removing it, or None when empty."""
        if self._size == 0:
            return None
        return self._key_of_slot[(<ReadyEntry*>self._entries)[0].slot]

    def pop_many(self, Py_ssize_t n):
        """Remove and return up to `n` job ids, best first."""
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        return [self._remove_at(0) for _ in range(min(n, self._size))]

    def remove(self, job_id):
        """Drop `job_id`; False if it was not queued."""
        cdef Py_ssize_t pos = self._position(job_id)
        if pos < 0:
            return False
        self._remove_at(pos)
        return True

    def update(self, job_id, double priority, bint lifo, double run_at):
        """Re-rank a queued job (its seq is kept); False if it was not queued."""
        cdef Py_ssize_t pos = self._position(job_id)
        cdef ReadyEntry* entry
        check_key(priority, run_at)
        if pos < 0:
            return False
        entry = &(<ReadyEntry*>self._entries)[pos]
        entry.priority = priority
        entry.run_at = run_at
        entry.lifo = lifo
        restore(<ReadyEntry*>self._entries, self._position_of_slot, self._size, pos)
        return True

    def ids(self):
        """Every queued job id, in no particular order."""
        return list(self._slot_of_key)

    cdef object _remove_at(self, Py_ssize_t pos):
        cdef ReadyEntry* heap = <ReadyEntry*>self._entries
        key = self._release_slot(heap[pos].slot)
        self._size -= 1
        fill_hole(heap, self._position_of_slot, self._size, pos)
        return key

"""Lease table: job id -> lease (token, owner, expiry), with an expiry heap for finding lapsed leases."""
from cpython.list cimport PyList_GET_ITEM
from cpython.mem cimport PyMem_Free
from libc.math cimport isfinite, isnan
from libc.stdint cimport UINT32_MAX, uint32_t

from bunqueue._core.heap cimport INITIAL_CAPACITY, fill_hole, grow_array, heapify, sift_up


cdef inline double checked_ttl(double now, double ttl) except? -1.0:
    if not isfinite(now):
        raise ValueError(f"now must be finite, got {now}")
    if isnan(ttl):
        raise ValueError("ttl must not be NaN")
    return ttl if ttl > 0.0 else 0.0


cdef class _Lease:
    pass


cdef class LeaseTable:
    """Active-job leases keyed by job id, with their expiries kept in order."""

    def __cinit__(self):
        self._lease_of_id = {}
        self._lease_of_slot = []
        self._free_slots = []
        self._next_stamp = 1
        self._reserve(INITIAL_CAPACITY)

    def __dealloc__(self):
        PyMem_Free(self._heap)

    def __len__(self):
        return len(self._lease_of_id)

    def __contains__(self, job_id):
        return job_id in self._lease_of_id

    def grant(self, str job_id not None, str token not None, owner, double now, double ttl):
        """Lease `job_id` to `owner` under `token` until now + ttl, replacing any lease it had."""
        cdef _Lease lease
        cdef Py_ssize_t slot
        ttl = checked_ttl(now, ttl)
        # Reserve before any change, so that a MemoryError cannot leave a lease without a heap entry.
        self._reserve(self._size + 1)
        lease = self._lease_of_id.get(job_id)
        if lease is None:
            if self._free_slots:
                slot = self._free_slots.pop()
            else:
                slot = len(self._lease_of_slot)
                if slot >= UINT32_MAX:
                    raise OverflowError("the lease table is full")
                self._lease_of_slot.append(None)
            lease = _Lease.__new__(_Lease)
            lease.job_id = job_id
            lease.slot = <uint32_t>slot
            self._lease_of_slot[slot] = lease
            self._lease_of_id[job_id] = lease
        lease.token = token
        lease.owner = owner
        lease.ttl = ttl
        lease.expires_at = now + ttl
        lease.renewals = 0
        self._schedule(lease)

    def token(self, job_id):
        """The token `job_id` is leased under, or None if it holds no lease."""
        cdef _Lease lease = self._lease_of_id.get(job_id)
        return None if lease is None else lease.token

    def owner(self, job_id):
        """The owner given at grant, or None if `job_id` holds no lease."""
        cdef _Lease lease = self._lease_of_id.get(job_id)
        return None if lease is None else lease.owner

    def expires_at(self, job_id):
        """When the lease of `job_id` runs out, or None if it holds no lease."""
        cdef _Lease lease = self._lease_of_id.get(job_id)
        return None if lease is None else lease.expires_at

    def ttl(self, job_id):
        """The ttl the lease of `job_id` is renewed by, or None if it holds no lease."""
        cdef _Lease lease = self._lease_of_id.get(job_id)
        return None if lease is None else lease.ttl

    def renewals(self, job_id):
        """How often the lease of `job_id` was renewed since its grant (0 if it holds no lease)."""
        cdef _Lease lease = self._lease_of_id.get(job_id)
        return 0 if lease is None else lease.renewals

    def renew(self, job_id, double now, ttl=None):
        """Extend a lease to now + ttl (the lease's own ttl when None); False if there is no lease."""
        cdef _Lease lease = self._lease_of_id.get(job_id)
        cdef double lease_ttl
        if lease is None:
            return False
        lease_ttl = checked_ttl(now, lease.ttl if ttl is None else <double>ttl)
        self._reserve(self._size + 1)
        lease.ttl = lease_ttl
        lease.expires_at = now + lease.ttl
        lease.renewals += 1
        self._schedule(lease)
        return True

    def release(self, job_id):
        """Drop the lease of `job_id`; False if it held none."""
        cdef _Lease lease = self._lease_of_id.get(job_id)
        if lease is None:
            return False
        self._forget(lease)
        self._compact_if_sparse()
        return True

    def pop_expired(self, double now, list renewals=None):
        """Remove the leases with expires_at <= now and return their job ids, earliest expiry first; with
        ``renewals``, append to it how often each was renewed, in the same order."""
        cdef list expired = []
        cdef DeadlineEntry top
        cdef _Lease lease
        while self._size and self._heap[0].when <= now:
            top = self._heap[0]
            self._pop_top()
            if self._is_live(&top):
                lease = self._lease_of_slot[top.slot]
                expired.append(lease.job_id)
                if renewals is not None:
                    renewals.append(lease.renewals)
                self._forget(lease)
        self._compact_if_sparse()
        return expired

    def next_deadline(self):
        """The earliest expires_at among the leases held, or None when there are none."""
        self._skip_stale()
        if self._size == 0:
            return None
        return self._heap[0].when

    cdef int _schedule(self, _Lease lease) except -1:
        self._reserve(self._size + 1)
        lease.stamp = self._next_stamp
        self._next_stamp += 1
        self._heap[self._size].when = lease.expires_at
        self._heap[self._size].seq = lease.stamp
        self._heap[self._size].slot = lease.slot
        self._size += 1
        sift_up(self._heap, NULL, self._size - 1)
        self._compact_if_sparse()
        return 0

    cdef bint _is_live(self, const DeadlineEntry* entry) noexcept:
        lease = <object>PyList_GET_ITEM(self._lease_of_slot, entry.slot)
        return lease is not None and (<_Lease>lease).stamp == entry.seq

    cdef void _skip_stale(self) noexcept:
        while self._size and not self._is_live(&self._heap[0]):
            self._pop_top()

    cdef void _compact_if_sparse(self) noexcept:
        cdef Py_ssize_t live = len(self._lease_of_id)
        cdef Py_ssize_t kept = 0
        cdef Py_ssize_t pos
        if self._size - live <= live:
            return
        for pos in range(self._size):
            if self._is_live(&self._heap[pos]):
                self._heap[kept] = self._heap[pos]
                kept += 1
        self._size = kept
        heapify(self._heap, kept)

    cdef int _forget(self, _Lease lease) except -1:
        del self._lease_of_id[lease.job_id]
        self._lease_of_slot[lease.slot] = None
        self._free_slots.append(lease.slot)
        return 0

    cdef int _reserve(self, Py_ssize_t needed) except -1:
        cdef Py_ssize_t capacity
        if needed <= self._capacity:
            return 0
        capacity = max(needed, 2 * self._capacity)
        grow_array(<void**>&self._heap, capacity, sizeof(DeadlineEntry))
        self._capacity = capacity
        return 0

    cdef void _pop_top(self) noexcept:
        self._size -= 1
        fill_hole(self._heap, NULL, self._size, 0)

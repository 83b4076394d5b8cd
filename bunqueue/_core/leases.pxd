# Leases: which worker holds which active job, under which token, until when.
#
# A dict from job id to a _Lease record answers the token checks of every ack, fail and heartbeat. A
# separate expiry min-heap finds the leases that ran out without scanning the table.
#
# The heap uses lazy deletion rather than an index: renewing or releasing a lease leaves its old heap
# entry behind, stale, and a renewal pushes a fresh one. Renewals are the hot path (every heartbeat) and
# their new expiry lies after nearly everything already queued, so the push usually stops at once
# instead of sifting an indexed entry down through the heap. Stale entries are skipped when they
# surface, and the heap is rebuilt from its live entries once stale ones outnumber them, which keeps it
# under twice the number of leases.
#
# Heap entries name their lease by slot, a small integer, so the heap holds no Python references. An
# entry is live when the lease now in its slot carries the entry's stamp; stamps are unique for the
# table's lifetime, so an entry outlives neither a renewal nor the reuse of its slot by another lease.
# Ties on expires_at go to the smaller stamp: the lease granted or renewed first expires first. The heap
# is the core's shared one (heap.pxd) over DeadlineEntry (when = expires_at, seq = stamp), unindexed.

cimport cython
from libc.stdint cimport uint32_t, uint64_t

from bunqueue._core.heap cimport DeadlineEntry


@cython.final
cdef class _Lease:
    cdef str job_id
    cdef str token
    # Opaque to the table (a connection, a worker name); it only hands it back.
    cdef object owner
    cdef double expires_at
    # Always >= 0: a ttl <= 0 is stored as 0, a lease that expires at the moment it is granted or renewed.
    cdef double ttl
    cdef Py_ssize_t renewals
    # Stamp of the one heap entry that is live for this lease.
    cdef uint64_t stamp
    cdef uint32_t slot


@cython.final
cdef class LeaseTable:
    cdef dict _lease_of_id
    # Lease held in each slot, or None when free; len() is the number of slots ever minted.
    cdef list _lease_of_slot
    # Slots freed by releases and expiries, reused before new ones are minted.
    cdef list _free_slots
    cdef DeadlineEntry* _heap
    # _size counts live and stale entries; live ones number len(_lease_of_id), one per lease.
    cdef Py_ssize_t _size
    cdef Py_ssize_t _capacity
    cdef uint64_t _next_stamp

    cdef int _schedule(self, _Lease lease) except -1
    cdef bint _is_live(self, const DeadlineEntry* entry) noexcept
    # Drops stale entries from the top, so that the top (if any) is the earliest live expiry.
    cdef void _skip_stale(self) noexcept
    # Rebuilds the heap from its live entries once stale ones are the majority.
    cdef void _compact_if_sparse(self) noexcept
    cdef int _forget(self, _Lease lease) except -1
    cdef int _reserve(self, Py_ssize_t needed) except -1
    cdef void _pop_top(self) noexcept

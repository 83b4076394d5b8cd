# The wall clock in epoch milliseconds, read with one clock_gettime (a vDSO call, no syscall): the broker's
# timestamps and deadlines (``now_ms``, JS ``Date.now()``'s integral float) and the UUIDv7 ids' time field.

from libc.stdint cimport int64_t
from posix.time cimport CLOCK_REALTIME, clock_gettime, timespec


cdef inline int64_t wall_ms() noexcept:
    cdef timespec now
    clock_gettime(CLOCK_REALTIME, &now)
    return <int64_t>now.tv_sec * 1000 + now.tv_nsec // 1000000

# UUIDv7 strings (RFC 9562) for job ids and tokens, written straight into a 36-character str.
#
# uuid_utils.uuid7() built a UUID object and formatted it through PyObject_Str, then freed the object:
# about 1,100 instructions per job of the ~9,500 a PUSHB job costs. Here an id is one PyUnicode_New(36,
# 127) filled two hex digits at a time from a table; the clock is one clock_gettime (vDSO, no syscall) and
# the random bits come from an os.urandom block the source holds, so an id makes no Python call and no
# syscall. Lowercase hex keeps string order equal to numeric order.
#
# Layout, most significant first: 48-bit Unix ms | version 7 (4 bits) | rand_a (12) | variant 0b10 (2) |
# rand_b (62). rand_a:rand_b are the 74 bits this source chooses.
#
# Job ids follow RFC 9562 §6.2 Method 2, "monotonic random": the first id of a millisecond takes 74 fresh
# random bits with the top one zero, and each further id in the same millisecond adds one to them, so the
# ids of one source strictly increase. A clock that stands still or steps back is read as the last
# millisecond used (ids keep counting on it); when the count runs out the millisecond advances by one.
# The fresh bits keep ids of different sources and processes apart; the counting keeps one source's in
# order, which the ready queue's FIFO and the clients' sorting by id rely on.
#
# Tokens (leases, workers, webhooks) authorise: a token must not be guessable from another one, so each
# takes its own 74 fresh random bits and the clock's millisecond, and never touches the job-id counter.
#
# Final (no subclasses), so jobfactory.pyx calls the methods directly, not through the type's table.

cimport cython
from libc.stdint cimport int64_t, uint64_t


@cython.final
cdef class UuidV7Source:
    # The millisecond of the last job id; -1 before the first. Job ids never go below it.
    cdef int64_t _last_ms
    # The 74-bit counter of the last job id, split where the version and variant bits split it:
    # rand_a (12 bits) and rand_b (62 bits).
    cdef uint64_t _rand_a
    cdef uint64_t _rand_b
    # os.urandom output not used yet: the bytes from _pool_pos on. One refill serves about 400 draws, so
    # the getrandom syscall and the Python call behind it are amortised over them.
    cdef bytes _pool
    cdef Py_ssize_t _pool_pos
    # The module's count of os.fork() children when the pool was filled. A forked child holds a copy of
    # its parent's pool and counter: left alone, both would hand out the same tokens and ids. A change
    # makes the child refill its pool and start its job ids from fresh bits.
    cdef unsigned long _forks_seen

    # The current wall-clock millisecond (the injectable clock is the `_at` variants' argument).
    cdef str job_id(self)
    cdef str token(self)
    # The same at a given millisecond (0 <= ms < 2**48, unchecked): how the tests drive the clock.
    cdef str job_id_at(self, int64_t ms)
    cdef str token_at(self, int64_t ms)
    # Refills the pool when it cannot serve a draw or came over a fork. os.urandom lets other threads run,
    # so an id refills before it reads any state: from there to its return nothing lets go of the GIL,
    # and two threads cannot interleave inside one id (which could hand out ids out of order).
    cdef int _refill_if_low(self) except -1
    # Makes `ms` the last millisecond and takes fresh counter bits for it, top bit cleared so that the
    # ids of a busy millisecond have at least 2**73 increments of room before the millisecond advances.
    cdef void _start_ms(self, int64_t ms) noexcept
    # 74 fresh random bits from the pool as rand_a (12) and rand_b (62); the caller refilled it first.
    cdef void _draw(self, uint64_t* rand_a, uint64_t* rand_b) noexcept

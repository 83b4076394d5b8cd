# cython: freethreading_compatible = False
"""UUIDv7 job ids (monotonic within one source) and tokens (fresh random bits each), see uuidv7.pxd."""
import os
import uuid

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING
from cpython.unicode cimport Py_UCS1, PyUnicode_1BYTE_DATA, PyUnicode_New
from libc.stdint cimport int64_t, uint16_t, uint64_t
from libc.string cimport memcpy

from bunqueue._core.clock cimport wall_ms

# Bytes per os.urandom call; each draw takes 10 (80 bits read, 74 kept).
cdef enum:
    POOL_SIZE = 4096
    DRAW_SIZE = 10

cdef int64_t MAX_MS = 0xFFFFFFFFFFFF
cdef uint64_t RAND_A_MASK = 0xFFF
cdef uint64_t RAND_B_MASK = 0x3FFFFFFFFFFFFFFF
# The counter's top bit, left clear in the fresh bits of a millisecond.
cdef uint64_t RAND_A_TOP = 0x800
cdef uint64_t VERSION_BITS = 0x7000
cdef uint64_t VARIANT_BITS = 0x8000000000000000

# "00" "01" ... "ff": one table lookup and one two-byte store per byte of the UUID.
cdef char HEX_PAIRS[512]
for _i, _pair in enumerate(f"{b:02x}" for b in range(256)):
    HEX_PAIRS[2 * _i] = ord(_pair[0])
    HEX_PAIRS[2 * _i + 1] = ord(_pair[1])
del _i, _pair

# Bumped in every child os.fork() makes; sources compare it with the value their pool was filled under.
cdef unsigned long _forks = 0


def _count_fork():
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_count_fork)


cdef inline int64_t clock_ms() noexcept:
    cdef int64_t ms = wall_ms()
    # A clock before 1970 has no UUIDv7 timestamp; the ids then count on from the epoch.
    return ms if ms > 0 else 0


cdef inline void put_byte(Py_UCS1* out, uint64_t word, int shift) noexcept:
    memcpy(out, &HEX_PAIRS[((word >> shift) & 0xFF) << 1], 2)


cdef str format_uuid(uint64_t high, uint64_t low):
    """The canonical 8-4-4-4-12 lowercase form of the UUID whose big-endian halves are high and low."""
    # Written out byte by byte: every offset and shift a constant, once per job (a loop over an offset
    # table measured 116 -> 137 ns per id).
    cdef str text = PyUnicode_New(36, 127)
    cdef Py_UCS1* out = PyUnicode_1BYTE_DATA(text)
    put_byte(out, high, 56)
    put_byte(out + 2, high, 48)
    put_byte(out + 4, high, 40)
    put_byte(out + 6, high, 32)
    out[8] = ord("-")
    put_byte(out + 9, high, 24)
    put_byte(out + 11, high, 16)
    out[13] = ord("-")
    put_byte(out + 14, high, 8)
    put_byte(out + 16, high, 0)
    out[18] = ord("-")
    put_byte(out + 19, low, 56)
    put_byte(out + 21, low, 48)
    out[23] = ord("-")
    put_byte(out + 24, low, 40)
    put_byte(out + 26, low, 32)
    put_byte(out + 28, low, 24)
    put_byte(out + 30, low, 16)
    put_byte(out + 32, low, 8)
    put_byte(out + 34, low, 0)
    return text


cdef inline str format_v7(int64_t ms, uint64_t rand_a, uint64_t rand_b):
    return format_uuid((<uint64_t>ms & MAX_MS) << 16 | VERSION_BITS | rand_a, VARIANT_BITS | rand_b)


cdef inline int64_t checked_ms(int64_t ms) except -1:
    if ms < 0 or ms > MAX_MS:
        raise ValueError(f"ms must be in 0..{MAX_MS}, got {ms}")
    return ms


# A copy (pickle, copy.copy) would repeat the pool and the counter, and so the ids and tokens.
@cython.auto_pickle(False)
cdef class UuidV7Source:
    """UUIDv7 strings: strictly increasing job ids, and tokens no other token gives away."""

    def __cinit__(self):
        self._last_ms = -1
        self._pool_pos = POOL_SIZE
        self._forks_seen = _forks

    def next_id(self):
        """A job id at the clock's millisecond (or after the last id's, when the clock is behind it)."""
        return self.job_id()

    def next_id_at(self, int64_t ms):
        """``next_id`` with the clock reading ``ms`` (Unix milliseconds)."""
        return self.job_id_at(checked_ms(ms))

    def new_token(self):
        """A token: a UUIDv7 at the clock's millisecond with 74 bits of its own randomness."""
        return self.token()

    def new_token_at(self, int64_t ms):
        """``new_token`` with the clock reading ``ms`` (Unix milliseconds)."""
        return self.token_at(checked_ms(ms))

    def resume_after(self, str job_id not None):
        """Continue the job ids after ``job_id``, a UUIDv7 from this or an earlier source, if it is later than
        the last id given. The tests reach the end of a millisecond's counter with it."""
        value = uuid.UUID(job_id)
        if value.version != 7 or value.variant != uuid.RFC_4122:
            raise ValueError(f"not a UUIDv7: {job_id!r}")
        number = value.int
        cdef int64_t ms = number >> 80
        cdef uint64_t rand_a = (number >> 64) & RAND_A_MASK
        cdef uint64_t rand_b = number & RAND_B_MASK
        if (ms, rand_a, rand_b) > (self._last_ms, self._rand_a, self._rand_b):
            self._last_ms = ms
            self._rand_a = rand_a
            self._rand_b = rand_b

    cdef str job_id(self):
        return self.job_id_at(clock_ms())

    cdef str token(self):
        return self.token_at(clock_ms())

    cdef str job_id_at(self, int64_t ms):
        cdef bint forked = self._forks_seen != _forks
        self._refill_if_low()
        cdef int64_t last = self._last_ms
        if forked and ms <= last:
            # A forked child: its counter is its parent's, so counting on would repeat the parent's next
            # ids. Fresh bits in a later millisecond keep this source increasing and part it from the
            # parent (which may draw in that millisecond too, as any other process may).
            ms = last + 1
        if ms > last:
            self._start_ms(ms)
        elif self._rand_b != RAND_B_MASK:
            self._rand_b += 1
        elif self._rand_a != RAND_A_MASK:
            self._rand_b = 0
            self._rand_a += 1
        else:
            # All 74 bits counted out (2**73 ids at least): borrow the next millisecond. Its 48 bits last
            # until the year 10889.
            self._start_ms(last + 1)
        return format_v7(self._last_ms, self._rand_a, self._rand_b)

    cdef str token_at(self, int64_t ms):
        cdef uint64_t rand_a, rand_b
        self._refill_if_low()
        self._draw(&rand_a, &rand_b)
        return format_v7(ms, rand_a, rand_b)

    cdef int _refill_if_low(self) except -1:
        if self._pool_pos > POOL_SIZE - DRAW_SIZE or self._forks_seen != _forks:
            self._pool = os.urandom(POOL_SIZE)
            self._pool_pos = 0
            self._forks_seen = _forks
        return 0

    cdef void _start_ms(self, int64_t ms) noexcept:
        self._draw(&self._rand_a, &self._rand_b)
        self._rand_a &= ~RAND_A_TOP
        self._last_ms = ms

    cdef void _draw(self, uint64_t* rand_a, uint64_t* rand_b) noexcept:
        cdef const unsigned char* bits = <const unsigned char*>PyBytes_AS_STRING(self._pool) + self._pool_pos
        cdef uint64_t b
        cdef uint16_t a
        self._pool_pos += DRAW_SIZE
        memcpy(&b, bits, 8)
        memcpy(&a, bits + 8, 2)
        rand_a[0] = a & RAND_A_MASK
        rand_b[0] = b & RAND_B_MASK

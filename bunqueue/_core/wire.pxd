# Wire constants as C sees them at compile time. Their one home is bunqueue/errors.py (MAX_FRAME_HEADER,
# INT32_MIN, UINT32_MAX); these are the C standard's own limits of the same types, and
# tests/test_errors_wire.py holds the two equal.

from libc.math cimport floor
from libc.stdint cimport INT32_MIN, UINT32_MAX

# A frame's length header: a big-endian uint32 (so a frame holds at most UINT32_MAX bytes).
cdef enum:
    FRAME_HEADER_SIZE = 4


# msgpackr writes an integral number in the int32/uint32 range as an integer and everything else as
# float64 (a uint64 would reach JS clients as a BigInt and break their arithmetic).
cdef inline bint is_wire_integer(double value) noexcept:
    return value == floor(value) and INT32_MIN <= value <= UINT32_MAX

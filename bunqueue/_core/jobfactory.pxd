# The design contract of the push path: one factory per broker, owning the id and sequence sources.
from bunqueue._core.jobs cimport Job
from bunqueue._core.uuidv7 cimport UuidV7Source


cdef class JobFactory:
    # The only source of job ids and admission sequence numbers.
    cdef unsigned long long _seq
    # Job ids (increasing, so FIFO ties and clients' sorting by id follow push order) and tokens.
    cdef UuidV7Source _ids

    cpdef Job build(self, dict opts, str queue, double now, bint batch)
    cpdef str new_token(self)

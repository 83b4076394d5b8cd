# PostgreSQL's binary COPY stream of pushed jobs, written straight from their typed fields.
#
# asyncpg's copy_records_to_table takes a tuple per row and encodes it field by field through its codecs,
# and building those tuples (escaped texts, the record) cost more per job than the rest of the push. Here
# each row is written into one C buffer in the layout ``COPY ... FROM STDIN (FORMAT binary)`` reads, the
# record by RowBuffer's writer, so a flush of pushes is one bytes object, ready before a connection is
# taken: the next flush can be prepared while the previous one is still in the database. It is a RowBuffer
# for the record's writer only: RowBuffer's parameter rows have no place in the stream.

from bunqueue._core.jobs cimport Job
from bunqueue._core.rows cimport RowBuffer


cdef class CopyRows(RowBuffer):
    # The namespace as its column stores it (escaped, UTF-8): the same in every row.
    cdef bytes namespace
    cdef Py_ssize_t rows_written
    cdef bint finished

    # A text field: its length, then its UTF-8 bytes with NUL and backslash escaped as pgtext.to_text does.
    cdef int _text(self, str value) except -1
    cdef int _plain_row(self, Job job, int state) except -1

# cython: freethreading_compatible = False
"""The SQLite writer's connection: a whole batch bound, stepped and committed with the GIL released.

Python's sqlite3 module takes the GIL back after every row's step and binds every parameter in Python, so a
writer thread built on it competes with the event loop once per row. Here the rows of a batch are already
bytes in a RowBuffer (serialised on the loop); the transaction runs in C from BEGIN to COMMIT, and the GIL is
taken once per batch.

The SQLite C API is not linked at build time: its functions are looked up at import in the library that
Python's own sqlite3 module loaded. One copy of SQLite in the process matters: POSIX file locks belong to the
process, and a second copy of the library closing its own descriptor of the file would drop the locks the
first one holds (https://www.sqlite.org/howtocorrupt.html, section 2.2.1). It also keeps the wheel free of a
bundled SQLite and the build free of its headers.
"""
import os
import sqlite3

from cpython.mem cimport PyMem_Calloc, PyMem_Free
from cpython.unicode cimport PyUnicode_DecodeUTF8
from libc.string cimport strlen, strncpy

from bunqueue._core.rows cimport PARAM_BLOB, PARAM_INT, PARAM_TEXT, Param, Row, RowBuffer

cdef extern from "<dlfcn.h>" nogil:
    void *dlopen(const char *path, int flags)
    void *dlsym(void *handle, const char *name)
    int RTLD_NOW
    int RTLD_NOLOAD
    void *RTLD_DEFAULT

cdef enum:
    SQLITE_OK = 0
    SQLITE_DONE = 101
    SQLITE_OPEN_READWRITE = 0x2
    SQLITE_OPEN_CREATE = 0x4
    # The connection is used by one thread at a time: no mutex of its own.
    SQLITE_OPEN_NOMUTEX = 0x8000
    # UPSERT (INSERT ... ON CONFLICT DO UPDATE), which the job rows use.
    MIN_VERSION = 3024000
    ERROR_TEXT = 512

ctypedef int (*open_v2_f)(const char *, void **, int, const char *) noexcept nogil
ctypedef int (*close_f)(void *) noexcept nogil
ctypedef int (*prepare_v2_f)(void *, const char *, int, void **, const char **) noexcept nogil
ctypedef int (*stmt_f)(void *) noexcept nogil
ctypedef int (*exec_f)(void *, const char *, void *, void *, char **) noexcept nogil
ctypedef int (*bind_int64_f)(void *, int, long long) noexcept nogil
ctypedef int (*bind_bytes_f)(void *, int, const char *, int, void *) noexcept nogil
ctypedef int (*bind_null_f)(void *, int) noexcept nogil
ctypedef const char *(*errmsg_f)(void *) noexcept nogil
ctypedef int (*version_f)() noexcept nogil


cdef struct Api:
    open_v2_f open_v2
    close_f close
    prepare_v2_f prepare_v2
    stmt_f finalize
    stmt_f step
    stmt_f reset
    exec_f exec_
    bind_int64_f bind_int64
    bind_bytes_f bind_text
    bind_bytes_f bind_blob
    bind_null_f bind_null
    errmsg_f errmsg
    close_f get_autocommit
    version_f libversion_number


cdef Api api
# Where the functions were found: "python" (the library of Python's sqlite3 module), "process" (already
# in the process's global scope) or the file name of a library loaded here.
LIBRARY = ""


cdef void *_lookup(void *handle, const char *name) noexcept:
    return NULL if handle == NULL else dlsym(handle, name)


cdef bint _resolve(void *handle) noexcept:
    api.open_v2 = <open_v2_f>_lookup(handle, b"sqlite3_open_v2")
    api.close = <close_f>_lookup(handle, b"sqlite3_close")
    api.prepare_v2 = <prepare_v2_f>_lookup(handle, b"sqlite3_prepare_v2")
    api.finalize = <stmt_f>_lookup(handle, b"sqlite3_finalize")
    api.step = <stmt_f>_lookup(handle, b"sqlite3_step")
    api.reset = <stmt_f>_lookup(handle, b"sqlite3_reset")
    api.exec_ = <exec_f>_lookup(handle, b"sqlite3_exec")
    api.bind_int64 = <bind_int64_f>_lookup(handle, b"sqlite3_bind_int64")
    api.bind_text = <bind_bytes_f>_lookup(handle, b"sqlite3_bind_text")
    api.bind_blob = <bind_bytes_f>_lookup(handle, b"sqlite3_bind_blob")
    api.bind_null = <bind_null_f>_lookup(handle, b"sqlite3_bind_null")
    api.errmsg = <errmsg_f>_lookup(handle, b"sqlite3_errmsg")
    api.get_autocommit = <close_f>_lookup(handle, b"sqlite3_get_autocommit")
    api.libversion_number = <version_f>_lookup(handle, b"sqlite3_libversion_number")
    return (
        api.open_v2 != NULL and api.close != NULL and api.prepare_v2 != NULL and api.finalize != NULL
        and api.step != NULL and api.reset != NULL and api.exec_ != NULL and api.bind_int64 != NULL
        and api.bind_text != NULL and api.bind_blob != NULL and api.bind_null != NULL
        and api.errmsg != NULL and api.get_autocommit != NULL and api.libversion_number != NULL
    )


def _load():
    global LIBRARY
    import _sqlite3  # the library it loaded is the one to use

    module_file = getattr(_sqlite3, "__file__", None)
    if module_file is not None and _resolve(dlopen(os.fsencode(module_file), RTLD_NOW | RTLD_NOLOAD)):
        LIBRARY = "python"
    elif _resolve(RTLD_DEFAULT):
        LIBRARY = "process"
    elif _resolve(dlopen(b"libsqlite3.so.0", RTLD_NOW)):
        LIBRARY = "libsqlite3.so.0"
    else:
        raise ImportError("the SQLite library of Python's sqlite3 module cannot be found")
    if api.libversion_number() < MIN_VERSION:
        raise ImportError(f"SQLite {sqlite3.sqlite_version} is too old: 3.24 or newer is needed")


_load()


cdef class BatchWriter:
    """One connection to the data file, for the thread that writes batches; not shared between threads.

    ``statements`` are the SQL texts a row's statement index refers to; ``pragmas`` run once on open.
    """

    cdef void *db
    cdef void **statements
    cdef int n_statements
    cdef void *begin
    cdef void *commit

    def __cinit__(self, str path, tuple pragmas, tuple statements):
        cdef int rc
        rc = api.open_v2(os.fsencode(path), &self.db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE
                         | SQLITE_OPEN_NOMUTEX, NULL)
        if rc != SQLITE_OK:
            message = "out of memory" if self.db == NULL else self._message()
            self._close()
            raise sqlite3.OperationalError(message)
        try:
            for pragma in pragmas:
                self.execute(pragma)
            self.statements = <void **>PyMem_Calloc(max(len(statements), 1), sizeof(void *))
            if self.statements == NULL:
                raise MemoryError()
            for sql in statements:
                self.statements[self.n_statements] = self._prepare(sql)
                self.n_statements += 1
            self.begin = self._prepare("BEGIN IMMEDIATE")
            self.commit = self._prepare("COMMIT")
        except BaseException:
            self._close()
            raise

    def __dealloc__(self):
        self._close()

    cdef void *_prepare(self, str sql) except NULL:
        cdef void *stmt = NULL
        if api.prepare_v2(self.db, sql.encode(), -1, &stmt, NULL) != SQLITE_OK or stmt == NULL:
            raise sqlite3.OperationalError(self._message())
        return stmt

    cdef str _message(self):
        return (<bytes>api.errmsg(self.db)).decode("utf-8", "replace")

    cdef int _check_open(self) except -1:
        if self.db == NULL:
            raise sqlite3.ProgrammingError("the writer is closed")
        return 0

    def execute(self, str sql):
        """Run SQL that returns no rows the caller needs (pragmas, a checkpoint)."""
        cdef bytes text = sql.encode()
        cdef const char *c_text = text
        cdef int rc
        self._check_open()
        with nogil:
            rc = api.exec_(self.db, c_text, NULL, NULL, NULL)
        if rc != SQLITE_OK:
            raise sqlite3.OperationalError(self._message())

    def write(self, RowBuffer rows):
        """Write every row in one transaction; on failure nothing of it stays and the error is raised."""
        cdef char error[ERROR_TEXT]
        cdef bint failed
        self._check_open()
        with nogil:
            failed = self._transaction(rows, error)
        if failed:
            raise sqlite3.OperationalError(PyUnicode_DecodeUTF8(error, strlen(error), "replace"))

    cdef bint _transaction(self, RowBuffer rows, char *error) noexcept nogil:
        cdef int rc = api.step(self.begin)
        api.reset(self.begin)
        if rc == SQLITE_DONE:
            rc = self._rows(rows)
        if rc == SQLITE_DONE:
            rc = api.step(self.commit)
            api.reset(self.commit)
        if rc == SQLITE_DONE:
            return False
        strncpy(error, api.errmsg(self.db), ERROR_TEXT - 1)
        error[ERROR_TEXT - 1] = 0
        # SQLite rolls back by itself on some errors (a full disk): roll back only what is still open.
        if api.get_autocommit(self.db) == 0:
            api.exec_(self.db, b"ROLLBACK", NULL, NULL, NULL)
        return True

    cdef int _rows(self, RowBuffer rows) noexcept nogil:
        cdef Py_ssize_t i
        cdef int j, rc
        cdef Row *row
        cdef Param *param
        cdef void *stmt
        cdef const char *base = rows.buf
        for i in range(rows.n_rows):
            row = &rows.rows[i]
            if row.statement < 0 or row.statement >= self.n_statements:
                return 1  # SQLITE_ERROR: a row for a statement this writer does not have
            stmt = self.statements[row.statement]
            for j in range(row.count):
                param = &rows.params[row.first + j]
                # No destructor (SQLITE_STATIC): the buffer outlives the step, and every step binds anew.
                if param.kind == PARAM_INT:
                    rc = api.bind_int64(stmt, j + 1, param.value)
                elif param.kind == PARAM_TEXT:
                    rc = api.bind_text(stmt, j + 1, base + param.value, <int>param.size, NULL)
                elif param.kind == PARAM_BLOB:
                    rc = api.bind_blob(stmt, j + 1, base + param.value, <int>param.size, NULL)
                else:
                    rc = api.bind_null(stmt, j + 1)
                if rc != SQLITE_OK:
                    return rc
            rc = api.step(stmt)
            api.reset(stmt)
            if rc != SQLITE_DONE:
                return rc
        return SQLITE_DONE

    def close(self):
        """Finalize the statements and close the connection (an open transaction rolls back)."""
        self._close()

    cdef void _close(self) noexcept:
        cdef int i
        for i in range(self.n_statements):
            api.finalize(self.statements[i])
        self.n_statements = 0
        PyMem_Free(self.statements)
        self.statements = NULL
        if self.begin != NULL:
            api.finalize(self.begin)
            self.begin = NULL
        if self.commit != NULL:
            api.finalize(self.commit)
            self.commit = NULL
        if self.db != NULL:
            api.close(self.db)
            self.db = NULL

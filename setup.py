"""Build the compiled core.

One list of extensions and one dict of Cython directives. Every build is a release build (``-O3``, no debug
information, symbols stripped), the one ``ci/build-wheel.sh`` ships included; ``BUNQUEUE_DEBUG=1`` builds with
line tracing (for coverage of the .pyx files), debug information and without C optimisation.
"""
from __future__ import annotations

import os
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("BUNQUEUE_DEBUG") == "1"

CORE_MODULES = [
    "framing", "heap", "readyqueue", "groups", "leases", "timers", "uuidv7", "jobs", "jobfactory", "admission",
    "packer", "rows", "jsonreply", "httprequest", "httpresponse", "unpacker", "copyrows", "clock",
]

DIRECTIVES = {
    "language_level": 3,
    "embedsignature": True,
    "cdivision": True,
}
MACROS: list[tuple[str, str | None]] = []
# The interpreter's own CFLAGS carry -g; -g0 after them drops it, and -s strips the symbol table.
CFLAGS = ["-O0", "-g"] if DEBUG else ["-O3", "-g0"]
LDFLAGS = [] if DEBUG else ["-s"]
if DEBUG:
    DIRECTIVES["linetrace"] = True
    MACROS.append(("CYTHON_TRACE_NOGIL", "1"))

extensions = [
    Extension(
        f"bunqueue._core.{name}",
        [f"bunqueue/_core/{name}.pyx"],
        define_macros=MACROS,
        extra_compile_args=CFLAGS,
        extra_link_args=LDFLAGS,
    )
    for name in CORE_MODULES
]
# Compiled modules outside the core: the per-job halves of the broker's hottest transitions, and the HTTP
# connection (a request's way from the socket to its answer).
COMPILED_MODULES = [
    "bunqueue.broker.transitions.admission", "bunqueue.broker.transitions.activation",
    "bunqueue.broker.transitions.completion",
    "bunqueue.server.http.connection",
]
extensions += [
    Extension(name, [name.replace(".", "/") + ".pyx"], define_macros=MACROS, extra_compile_args=CFLAGS,
              extra_link_args=LDFLAGS)
    for name in COMPILED_MODULES
]
# The SQLite writer finds the SQLite C API at run time (dlsym in the library Python's sqlite3 module loaded):
# no SQLite headers or library at build time. glibc before 2.34 keeps dlopen in libdl.
extensions.append(
    Extension(
        "bunqueue.storage.batchwriter",
        ["bunqueue/storage/batchwriter.pyx"],
        define_macros=MACROS,
        extra_compile_args=CFLAGS,
        extra_link_args=LDFLAGS,
        libraries=["dl"] if sys.platform.startswith("linux") else [],
    )
)

# The C compiler runs one extension per core: the build is most of a fresh install's time.
setup(
    ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES, annotate=False),
    options={"build_ext": {"parallel": os.cpu_count() or 1}},
)

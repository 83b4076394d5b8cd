"""Build the compiled core.

One list of extensions and one dict of Cython directives. ``BUNQUEUE_DEBUG=1`` builds with line tracing
(for coverage of the .pyx files) and without C optimisation.
"""
from __future__ import annotations

import os

from Cython.Build import cythonize
from setuptools import Extension, setup

DEBUG = os.environ.get("BUNQUEUE_DEBUG") == "1"

CORE_MODULES = ["framing", "heap", "readyqueue", "leases", "timers", "jobs", "packer"]

DIRECTIVES = {
    "language_level": 3,
    "embedsignature": True,
    "cdivision": True,
}
MACROS: list[tuple[str, str | None]] = []
CFLAGS = ["-O0", "-g"] if DEBUG else ["-O2"]
if DEBUG:
    DIRECTIVES["linetrace"] = True
    MACROS.append(("CYTHON_TRACE_NOGIL", "1"))

extensions = [
    Extension(
        f"bunqueue._core.{name}",
        [f"bunqueue/_core/{name}.pyx"],
        define_macros=MACROS,
        extra_compile_args=CFLAGS,
    )
    for name in CORE_MODULES
]

setup(ext_modules=cythonize(extensions, compiler_directives=DIRECTIVES, annotate=False))

"""Guards on the shape of the package: every module imports alone, the import graph has no cycle (imports
under TYPE_CHECKING and inside functions count), and only the module that defines ``Broker`` touches its
private names."""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "bunqueue"
# The facade and the class it is built on, by module: only these touch the broker's private names.
BROKER_CLASSES = {"bunqueue.broker.wiring": "Wiring", "bunqueue.broker.facade": "Broker"}


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _sources() -> dict[str, Path]:
    return {_module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


MODULES = _sources()


def _compiled() -> list[str]:
    return sorted(_module_name(path) for path in PACKAGE.rglob("*.pyx"))


COMPILED = {_module_name(path): path for path in sorted(PACKAGE.rglob("*.pyx"))}


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not MODULES[module].name == "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


# A compiled module's imports, read from its Cython source (absolute imports only, as its header has them).
_PYX_IMPORT = re.compile(r"^from\s+(bunqueue[\w.]*)\s+c?import\s+([\w, ]+)$|^import\s+(bunqueue[\w.]*)", re.M)


def _imported_names(module: str) -> list[str]:
    if module not in MODULES:
        names = []
        for target, items, plain in _PYX_IMPORT.findall(COMPILED[module].read_text()):
            names += [plain] if plain else [f"{target}.{item.strip()}" for item in items.split(",")] + [target]
        return names
    names = []
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            names += [f"{target}.{alias.name}" for alias in node.names] + [target]
    return names


def _imports(module: str) -> set[str]:
    """Every bunqueue module that ``module`` imports anywhere in its source."""
    found: set[str] = set()
    for name in _imported_names(module):
        # `from pkg import mod` names the submodule; `from mod import thing` names the module.
        while name and name not in MODULES and name not in COMPILED:
            name = name.rpartition(".")[0]
        if name.startswith("bunqueue") and name != module:
            found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    return {module: _imports(module) for module in [*MODULES, *COMPILED]}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph, or None."""
    done: set[str] = set()
    stack: list[str] = []
    on_stack: set[str] = set()

    def visit(node: str) -> list[str] | None:
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt in on_stack:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in done:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        on_stack.discard(node)
        done.add(node)
        return None

    for node in sorted(graph):
        if node not in done:
            found = visit(node)
            if found:
                return found
    return None


def test_the_import_graph_has_no_cycle() -> None:
    cycle = _cycle(_graph())
    assert cycle is None, " -> ".join(cycle or [])


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


# Imports each module named on stdin in a child forked from an interpreter that holds standard-library
# modules only (their import is most of a fresh interpreter's time), a few children at a time; prints
# {module: traceback or ""} as JSON.
_IMPORT_EACH_ALONE = """
import importlib, json, os, sys, traceback
for name in sys.argv[2:]:
    importlib.import_module(name)
assert not [name for name in sys.modules if name.split(".")[0] == "bunqueue"]
results, running, pending = {}, {}, sys.stdin.read().split()
def reap():
    pid, _ = os.wait()
    module, read_end = running.pop(pid)
    with os.fdopen(read_end, "rb") as pipe:
        results[module] = pipe.read().decode()
while pending or running:
    if not pending or len(running) >= int(sys.argv[1]):
        reap()
        continue
    module = pending.pop()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        try:
            importlib.import_module(module)
            os._exit(0)
        except BaseException:
            os.write(write_end, traceback.format_exc().encode() or b"failed")
            os._exit(1)
    os.close(write_end)
    running[pid] = (module, read_end)
print(json.dumps(results))
"""
_STDLIB_PRELOAD = [
    "asyncio", "ssl", "json", "logging", "typing", "dataclasses", "sqlite3", "http.client", "email.message",
    "concurrent.futures", "urllib.parse", "inspect", "argparse", "socket", "subprocess", "pathlib", "re",
    "tomllib", "uuid", "hashlib", "decimal", "datetime", "collections", "functools", "struct", "contextlib",
    "enum", "base64", "signal", "shutil", "tempfile", "zlib",
]
ALL_MODULES = sorted(set(MODULES) | set(_compiled()))


@pytest.fixture(scope="module")
def imported_alone() -> dict[str, str]:
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH_ALONE, str(max(2, os.cpu_count() or 1)), *_STDLIB_PRELOAD],
        input="\n".join(ALL_MODULES), capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return dict(json.loads(proc.stdout))


@pytest.mark.parametrize("module", ALL_MODULES)
def test_every_module_imports_alone(module: str, imported_alone: dict[str, str]) -> None:
    assert imported_alone.get(module) == "", imported_alone.get(module, "not tried")


def test_a_module_that_fails_to_import_is_reported(tmp_path: Path) -> None:
    (tmp_path / "broken_on_import.py").write_text("import bunqueue_no_such_module\n")
    proc = subprocess.run(
        [sys.executable, "-c", _IMPORT_EACH_ALONE, "2"], input="broken_on_import json",
        capture_output=True, text=True, timeout=60, env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    results = json.loads(proc.stdout)
    assert results["json"] == ""
    assert "No module named 'bunqueue_no_such_module'" in results["broken_on_import"]


def _broker_private_names() -> set[str]:
    names: set[str] = set()
    for module, class_name in BROKER_CLASSES.items():
        names |= _private_names_of(module, class_name)
    return names


def _private_names_of(module: str, class_name: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(MODULES[module].read_text())):
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in ast.walk(node):
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and _private(item.name):
                    names.add(item.name)
                elif isinstance(item, ast.Attribute) and _private(item.attr):
                    if isinstance(item.value, ast.Name) and item.value.id == "self":
                        names.add(item.attr)
    return names


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def test_only_the_broker_module_touches_private_names_of_broker() -> None:
    private = _broker_private_names()
    offenders = []
    for module, path in MODULES.items():
        if module in BROKER_CLASSES:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            # An object's own private names are its business; the broker's are reached through another name.
            owner = node.value if isinstance(node, ast.Attribute) else None
            if isinstance(owner, ast.Name) and owner.id == "self":
                continue
            if isinstance(node, ast.Attribute) and node.attr in private:
                offenders.append(f"{module}:{node.lineno} .{node.attr}")
    assert not offenders, offenders


# -- job state: one mover -----------------------------------------------------------------------------

# Assigning ``.state`` is a move between job states: the transitions make every one of them. Compiled
# admission (``_core/admission.pyx``), the job factory and the store's row decoding set a state that was
# never a move, as the transitions package docstring says.
STATE_WRITERS = ("bunqueue.broker.transitions", "bunqueue._core", "bunqueue.storage")
_PYX_STATE_WRITE = re.compile(r"^\s*[\w.\[\]]+\.state\s*=[^=]", re.M)


def _state_writes(module: str, source: str) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for item in ast.walk(target):
                if isinstance(item, ast.Attribute) and item.attr == "state" and isinstance(item.ctx, ast.Store):
                    found.append(f"{module}:{node.lineno}")
    return found


def test_only_transitions_assign_a_job_state() -> None:
    offenders = []
    for module, path in MODULES.items():
        if not module.startswith(STATE_WRITERS):
            offenders += _state_writes(module, path.read_text())
    for path in PACKAGE.rglob("*.pyx"):
        module = _module_name(path)
        if not module.startswith(STATE_WRITERS) and _PYX_STATE_WRITE.search(path.read_text()):
            offenders.append(module)
    assert not offenders, offenders


def test_the_state_write_finder_finds_writes() -> None:
    assert _state_writes("m", "job.state = 1\nx.y.state += 2\nother = job.state\n") == ["m:1", "m:2"]


def test_a_move_the_diagram_lacks_is_refused_in_the_debug_build() -> None:
    from bunqueue._core.jobfactory import JobFactory
    from bunqueue.broker import states
    from bunqueue.broker.transitions import moves

    assert moves.CHECKED  # tests/conftest.py sets BUNQUEUE_DEBUG=1
    job = JobFactory().build({}, "q", 0.0, False)
    moves.check_move(job, states.READY)
    with pytest.raises(moves.IllegalMove):
        moves.check_move(job, states.ACTIVE)


# -- names ----------------------------------------------------------------------------------------------

def _stems() -> dict[str, list[str]]:
    stems: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        if path.name != "__init__.py":
            stems.setdefault(path.stem, []).append(module)
    return stems


FAMILY_PACKAGES = ("bunqueue.broker.ops", "bunqueue.commands", "bunqueue.storage.postgres.ops")


def _paired(modules: list[str]) -> bool:
    """``commands/X.py``, ``broker/ops/X.py`` and ``storage/postgres/ops/X.py``: a command family's requests
    and each engine's operations."""
    packages = sorted(m.rpartition(".")[0] for m in modules)
    return len(packages) == len(set(packages)) and set(packages) <= set(FAMILY_PACKAGES) and len(packages) > 1


def test_no_module_name_is_used_three_times_or_twice_in_one_subpackage() -> None:
    offenders = []
    for modules in _stems().values():
        if len(modules) < 2 or _paired(modules):
            continue
        subpackages = [m.split(".")[1] for m in modules]
        if len(modules) > 2 or len(set(subpackages)) < len(subpackages):
            offenders.append(modules)
    assert not offenders, offenders


def test_every_broker_operation_module_pairs_with_a_command_module() -> None:
    ops = {m.rpartition(".")[2] for m in MODULES if m.startswith("bunqueue.broker.ops.")}
    commands = {m.rpartition(".")[2] for m in MODULES if m.startswith("bunqueue.commands.")}
    assert ops <= commands, ops - commands


# -- the layers of broker/ and the seam to the command layer -----------------------------------------------

B = "bunqueue.broker"
# What each part of broker/ must not import (``.`` prefixes: a package and everything in it).
FORBIDDEN = {
    f"{B}.components.": (f"{B}.ops", f"{B}.transitions", f"{B}.wiring", f"{B}.facade", f"{B}.engine",
                         f"{B}.timers.cronregistry", f"{B}.timers.groupcontrols", f"{B}.timers.ratelimits",
                         f"{B}.timers.stalls", f"{B}.timers.timeouts", f"{B}.timers.workerregistry"),
    f"{B}.timers.": (f"{B}.ops", f"{B}.transitions", f"{B}.wiring", f"{B}.facade", f"{B}.engine"),
    f"{B}.transitions": (f"{B}.ops", f"{B}.wiring", f"{B}.facade", f"{B}.engine"),
    f"{B}.wiring": (f"{B}.ops", f"{B}.facade", f"{B}.engine"),
    f"{B}.ops.": (f"{B}.facade", f"{B}.engine"),
}
# The command layer sees the engine protocol (and the types it exports) and the state names: never the
# facade class, so a handler can only call what a second engine implements too.
COMMANDS_MAY_IMPORT = (f"{B}.engine", f"{B}.states")


def _layer_violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for module, imported in graph.items():
        for prefix, forbidden in FORBIDDEN.items():
            if module.startswith(prefix):
                out += [f"{module} -> {name}" for name in imported if name.startswith(forbidden)]
        if module.startswith(f"{B}.") and not module.startswith((f"{B}.ops.", f"{B}.facade")):
            out += [f"{module} -> {name}" for name in imported if name.startswith(f"{B}.ops")]
        if module.startswith("bunqueue.commands"):
            out += [
                f"{module} -> {name}" for name in imported
                if name.startswith(f"{B}.") and name not in COMMANDS_MAY_IMPORT
            ]
    return out


def test_broker_layers_and_the_command_seam_hold() -> None:
    assert not _layer_violations(_graph())


def test_the_layer_check_finds_violations() -> None:
    assert _layer_violations({f"{B}.components.records": {f"{B}.ops.dlq"}})
    assert _layer_violations({"bunqueue.commands.dlq": {f"{B}.components.deadletters"}})
    assert _layer_violations({"bunqueue.commands.dlq": {f"{B}.facade"}})
    assert not _layer_violations({"bunqueue.commands.dlq": {f"{B}.engine"}})


def _engine_members() -> set[str]:
    """What the ``Engine`` protocol declares: its methods and attributes."""
    for node in ast.parse(MODULES[f"{B}.engine"].read_text()).body:
        if isinstance(node, ast.ClassDef) and node.name == "Engine":
            names = set()
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    names.add(item.target.id)
            return names
    raise AssertionError("no Engine class in broker/engine.py")


def _reaches_past_the_engine(module: str, source: str, members: set[str]) -> list[str]:
    """Uses of a handler's ``broker`` argument that are not a member of ``Engine`` (a component reached
    through the facade, e.g. ``broker.dlq.entries``)."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "broker":
            if node.attr not in members:
                out.append(f"{module}:{node.lineno} broker.{node.attr}")
    return out


def test_commands_use_only_the_engine_protocol() -> None:
    members = _engine_members()
    offenders = []
    for module, path in MODULES.items():
        if module.startswith("bunqueue.commands"):
            offenders += _reaches_past_the_engine(module, path.read_text(), members)
    assert not offenders, offenders


def test_the_engine_check_finds_a_component_reach() -> None:
    members = _engine_members()
    assert "push" in members and "clock" in members
    source = "broker.dlq.entries('q')\nbroker.push('q', {})\n"
    assert _reaches_past_the_engine("m", source, members) == ["m:1 broker.dlq"]


# -- the tests mirror the package ----------------------------------------------------------------------------

TESTS = Path(__file__).resolve().parent
# Subpackages whose tests are not in a folder of their own, and where they are.
TESTED_ELSEWHERE = {
    "commands": "tests/protocol/, one file per command family over a real socket",
    "_testbase": "the suite's own harness, checked where it serves (tests/storage/test_test_postgres.py)",
}
# Suites across the package: real sockets, crashes and restarts, the published clients, shared scenarios,
# and the dashboard's files (bunqueue/ui, no modules) as a person sees them in a real browser.
CROSS_CUTTING = {"protocol", "reliability", "compat", "conformance", "ui"}


def _subpackages() -> list[str]:
    """Every folder of the package that holds modules, as a path below ``bunqueue/``."""
    return sorted(
        path.relative_to(PACKAGE).as_posix() for path in PACKAGE.rglob("*")
        if path.is_dir() and path.name != "__pycache__" and any(path.glob("*.py*"))
    )


def _test_folder(subpackage: str) -> str:
    """``bunqueue/a/b`` is tested in ``tests/a/b``; a private package drops its underscore (``_core``: ``core``)."""
    return "/".join(part.lstrip("_") for part in subpackage.split("/"))


def _test_folders() -> set[str]:
    """Every folder below ``tests/`` that holds a test module."""
    return {path.parent.relative_to(TESTS).as_posix() for path in TESTS.rglob("test_*.py")} - {"."}


def _layout_gaps(subpackages: list[str], folders: set[str]) -> list[str]:
    gaps = [
        f"bunqueue/{sub}: no tests/{_test_folder(sub)}/" for sub in subpackages
        if sub not in TESTED_ELSEWHERE and _test_folder(sub) not in folders
    ]
    mirrors = {_test_folder(sub) for sub in subpackages}
    gaps += [
        f"tests/{folder}/: mirrors no subpackage" for folder in sorted(folders)
        if folder not in mirrors and folder.split("/")[0] not in CROSS_CUTTING
    ]
    return gaps


def test_the_tests_mirror_the_package() -> None:
    assert not _layout_gaps(_subpackages(), _test_folders())


def test_the_layout_check_finds_a_gap() -> None:
    assert _layout_gaps(["_core", "broker/ops", "commands"], {"core", "ops"}) == [
        "bunqueue/broker/ops: no tests/broker/ops/",
        "tests/ops/: mirrors no subpackage",
    ]
    assert not _layout_gaps(["_core", "broker", "broker/ops"], {"core", "broker", "broker/ops", "protocol"})


def test_every_test_folder_is_a_package() -> None:
    """Test modules are imported by their dotted path (``tests.core.test_heap``), so two folders may hold
    modules of the same name: that needs an ``__init__.py`` in each folder up to ``tests/``."""
    folders = {TESTS} | {TESTS / folder for folder in _test_folders()}
    folders |= {parent for folder in folders for parent in folder.parents if TESTS in parent.parents}
    assert not sorted(str(f.relative_to(TESTS.parent)) for f in folders if not (f / "__init__.py").exists())


def test_the_graph_reads_a_compiled_modules_imports() -> None:
    imports = _imports("bunqueue.broker.transitions.completion")
    assert {"bunqueue._core.jobs", "bunqueue.broker.transitions.moves", "bunqueue.broker.components.records"} <= imports

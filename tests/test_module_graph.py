"""Guards on the shape of the package: every module imports alone, the import graph has no cycle (imports
under TYPE_CHECKING and inside functions count), and only the module that defines ``Broker`` touches its
private names."""
from __future__ import annotations

import ast
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


def _resolve(module: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not MODULES[module].name == "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module: str) -> set[str]:
    """Every bunqueue module that ``module`` imports anywhere in its source."""
    tree = ast.parse(MODULES[module].read_text())
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, node)
            names = [f"{target}.{alias.name}" for alias in node.names] + [target]
        else:
            continue
        for name in names:
            # `from pkg import mod` names the submodule; `from mod import thing` names the module.
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name.startswith("bunqueue") and name != module:
                found.add(name)
    return found


def _graph() -> dict[str, set[str]]:
    return {module: _imports(module) for module in MODULES}


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


@pytest.mark.parametrize("module", sorted(set(MODULES) | set(_compiled())))
def test_every_module_imports_alone(module: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr


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

"""Each compiled module's .pyi stub names what the module has: no stray names, nothing left out."""
from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path
from types import ModuleType

import pytest

CORE = Path(__file__).resolve().parents[2] / "bunqueue" / "_core"
STUBS = sorted(CORE.glob("*.pyi"))


def stub_names(path: Path) -> dict[str, set[str] | None]:
    """Top-level names of a stub; for a class, the names it declares (methods, attributes)."""
    names: dict[str, set[str] | None] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef):
            members = set()
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    members.add(item.name)
                elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
                    members.add(item.target.id)
            names[node.name] = members
        elif isinstance(node, ast.FunctionDef):
            names[node.name] = None
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            # A type alias exists for the type checker only.
            if not (isinstance(node.annotation, ast.Name) and node.annotation.id == "TypeAlias"):
                names[node.target.id] = None
    return names


def public_names(module: ModuleType) -> set[str]:
    """What the module defines for its users: its own classes and functions, and its constants."""
    names = set()
    for name, value in vars(module).items():
        if name.startswith("_"):
            continue
        if getattr(value, "__module__", None) == module.__name__ and (inspect.isclass(value) or callable(value)):
            names.add(name)
        elif name.isupper() and type(value) in (int, float, str):
            names.add(name)
    return names


def test_every_compiled_module_has_a_stub() -> None:
    compiled = {path.name.split(".")[0] for path in CORE.glob("*.so")} | {p.stem for p in CORE.glob("*.pyd")}
    assert compiled, "the extensions are not built"
    assert compiled == {path.stem for path in STUBS}


@pytest.mark.parametrize("stub", STUBS, ids=lambda path: path.stem)
def test_stub_names_match_the_module(stub: Path) -> None:
    module = importlib.import_module(f"bunqueue._core.{stub.stem}")
    names = stub_names(stub)
    assert sorted(n for n in names if not hasattr(module, n)) == []
    assert sorted(public_names(module) - set(names)) == []
    for class_name, members in names.items():
        if members is None:
            continue
        cls = getattr(module, class_name)
        assert sorted(m for m in members if not hasattr(cls, m)) == [], class_name
        own = {m for m in vars(cls) if not m.startswith("_")}
        assert sorted(own - members) == [], class_name

"""The public surface of the published SDK (``bunqueue-client`` 0.1.5), recorded once in
``sdk_surface.json``, against this package's: every exported name, every public method and property of
every class, and every parameter with its kind, position and default.

To record it again: ``python tests/sdk/test_surface.py DIR > tests/sdk/sdk_surface.json``, where
DIR holds the SDK's ``bunqueue`` package (an unpacked wheel).
"""
from __future__ import annotations

import importlib
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

RECORDED = Path(__file__).with_name("sdk_surface.json")
#: The modules whose exports are recorded: the top-level package and the simple mode's.
MODULES = ("bunqueue", "bunqueue.simple")
NO_DEFAULT = "<required>"
# Dunder methods a program written for the SDK relies on.
PROTOCOL_METHODS = ("__init__", "__enter__", "__exit__")


def _parameters(fn: Any) -> list[list[str]]:
    out = []
    for param in inspect.signature(fn).parameters.values():
        default = NO_DEFAULT if param.default is inspect.Parameter.empty else repr(param.default)
        out.append([param.name, param.kind.name, default])
    return out


def _describe_class(cls: type) -> dict[str, Any]:
    methods: dict[str, list[list[str]]] = {}
    properties: list[str] = []
    for attr in sorted(dir(cls)):
        if attr.startswith("_") and attr not in PROTOCOL_METHODS:
            continue
        owner = next(k for k in cls.__mro__ if attr in vars(k))
        if owner.__module__ == "builtins":  # object's and the exceptions' own methods
            continue
        value = inspect.getattr_static(cls, attr)
        if isinstance(value, property):
            properties.append(attr)
        elif isinstance(value, (staticmethod, classmethod)):
            methods[attr] = _parameters(getattr(cls, attr))
        elif callable(value) and not isinstance(value, type):
            methods[attr] = _parameters(value)
    return {"methods": methods, "properties": properties}


# Objects made without a server (nothing connects before the first call), whose public instance
# attributes are part of the surface too.
SAMPLES: dict[str, Callable[[ModuleType], Any]] = {
    "Job": lambda m: m.Job({"id": "1", "queue": "q", "data": {}}),
    "Queue": lambda m: m.Queue("q"),
    "Worker": lambda m: m.Worker("q", print, autorun=False),
    "FlowProducer": lambda m: m.FlowProducer(),
    "Connection": lambda m: m.Connection(),
    "EventEmitter": lambda m: m.EventEmitter(),
    "CancellationManager": lambda m: m.CancellationManager(),
    "CancelSignal": lambda m: m.CancelSignal(),
    "Bunqueue": lambda m: m.Bunqueue("q", processor=print, autorun=False),
}


def _attributes(sample: Any, names: Any) -> dict[str, str]:
    """Public attribute -> the name of its value's type."""
    return {a: type(getattr(sample, a)).__name__ for a in sorted(names) if not a.startswith("_")}


def samples(package: ModuleType) -> dict[str, Any]:
    return {name: make(package) for name, make in SAMPLES.items()}


def describe(package: ModuleType, simple: ModuleType) -> dict[str, Any]:
    """The surface of the SDK's two public modules, ``bunqueue`` and ``bunqueue.simple``."""
    surface: dict[str, Any] = {"names": {}, "classes": {}, "functions": {}, "attributes": {}}
    for name, sample in samples(package).items():
        surface["attributes"][name] = _attributes(sample, vars(sample))
    for module in (package, simple):
        names = sorted(n for n in getattr(module, "__all__", ()) if not n.startswith("_"))
        surface["names"][module.__name__] = names
        for name in names:
            value = getattr(module, name)
            if isinstance(value, type):
                surface["classes"][name] = _describe_class(value)
            elif inspect.isfunction(value):
                surface["functions"][name] = _parameters(value)
    return surface


def _ours() -> dict[str, Any]:
    package = importlib.import_module("bunqueue")
    surface = describe(package, importlib.import_module("bunqueue.simple"))
    # Here an attribute may be a property or a method's twin as well as an instance attribute.
    for name, sample in samples(package).items():
        surface["attributes"][name] = _attributes(sample, dir(sample))
        close = getattr(sample, "close", None)
        if close is not None:
            close()
    return surface


def _signature_gaps(where: str, sdk: list[list[str]], ours: list[list[str]] | None) -> list[str]:
    """What a call written for the SDK's signature could not do with ours."""
    if ours is None:
        return [f"{where}: missing"]
    gaps = []
    by_name = {p[0]: (i, p) for i, p in enumerate(ours)}
    our_kinds = {p[1] for p in ours}
    for index, (name, kind, default) in enumerate(sdk):
        if kind in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            if kind not in our_kinds:
                gaps.append(f"{where}: no {kind} parameter (*{name})")
            continue
        if name not in by_name:
            gaps.append(f"{where}: no parameter {name!r}")
            continue
        our_index, (_, our_kind, our_default) = by_name[name]
        if kind in ("POSITIONAL_OR_KEYWORD", "POSITIONAL_ONLY") and (our_index != index or our_kind != kind):
            gaps.append(f"{where}: {name!r} is {our_kind} at {our_index}, the SDK's is {kind} at {index}")
        if default != NO_DEFAULT and our_default != default:
            gaps.append(f"{where}: {name!r} defaults to {our_default}, the SDK's to {default}")
    sdk_names = {p[0] for p in sdk}
    for name, kind, default in ours:
        if name not in sdk_names and default == NO_DEFAULT and kind not in ("VAR_POSITIONAL", "VAR_KEYWORD"):
            gaps.append(f"{where}: {name!r} is required here, and unknown to the SDK")
    return gaps


def surface_gaps(sdk: dict[str, Any], ours: dict[str, Any]) -> list[str]:
    gaps = []
    for module, names in sdk["names"].items():
        missing = sorted(set(names) - set(ours["names"].get(module, ())))
        gaps += [f"{module}.{name}: not exported" for name in missing]
    for cls, spec in sdk["classes"].items():
        mine = ours["classes"].get(cls)
        if mine is None:
            gaps.append(f"{cls}: no such class")
            continue
        gaps += [f"{cls}.{p}: no such property" for p in spec["properties"] if p not in mine["properties"]]
        for method, params in spec["methods"].items():
            gaps += _signature_gaps(f"{cls}.{method}", params, mine["methods"].get(method))
    for fn, params in sdk["functions"].items():
        gaps += _signature_gaps(fn, params, ours["functions"].get(fn))
    for cls, attributes in sdk["attributes"].items():
        mine = ours["attributes"].get(cls, {})
        for attribute, kind in attributes.items():
            if attribute not in mine:
                gaps.append(f"{cls}().{attribute}: no such attribute")
            elif kind in sdk["classes"] and mine[attribute] != kind:
                # An SDK object (a Connection) must be one here too, not merely something.
                gaps.append(f"{cls}().{attribute}: a {mine[attribute]}, the SDK's is a {kind}")
    return gaps


def test_every_sdk_name_method_parameter_and_default_is_here() -> None:
    sdk = json.loads(RECORDED.read_text())
    assert {"Queue", "Worker", "Job", "Bunqueue", "CancellationManager"} <= set(sdk["classes"])
    assert surface_gaps(sdk, _ours()) == []


def test_the_comparison_finds_gaps() -> None:
    sdk = json.loads(RECORDED.read_text())
    ours = json.loads(json.dumps(_ours()))
    add = ours["classes"]["Queue"]["methods"]["add"]
    add[:] = [p for p in add if p[0] != "data"]
    ours["classes"]["Worker"]["methods"]["__init__"] = [
        [n, k, "99" if n == "concurrency" else d] for n, k, d in ours["classes"]["Worker"]["methods"]["__init__"]]
    del ours["classes"]["Job"]["methods"]["log"]
    ours["names"]["bunqueue"].remove("CancelSignal")
    ours["attributes"]["Queue"]["connection"] = "NoneType"
    del ours["attributes"]["Job"]["token"]
    assert surface_gaps(sdk, ours) == [
        "bunqueue.CancelSignal: not exported",
        "Job.log: missing",
        "Queue.add: no parameter 'data'",
        "Worker.__init__: 'concurrency' defaults to 99, the SDK's to 4",
        "Job().token: no such attribute",
        "Queue().connection: a NoneType, the SDK's is a Connection",
    ]


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(__doc__)
    sys.path.insert(0, sys.argv[1])
    for loaded in [m for m in sys.modules if m == "bunqueue" or m.startswith("bunqueue.")]:
        del sys.modules[loaded]
    sdk_package = importlib.import_module("bunqueue")
    if not str(Path(sdk_package.__file__ or "")).startswith(str(Path(sys.argv[1]).resolve())):
        raise SystemExit(f"bunqueue was imported from {sdk_package.__file__}, not from {sys.argv[1]}")
    json.dump(describe(sdk_package, importlib.import_module("bunqueue.simple")), sys.stdout, indent=1,
              sort_keys=True)
    sys.stdout.write("\n")

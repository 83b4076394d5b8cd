"""Tool input schemas: JSON Schema (draft-07, as the original publishes them) built from a few helpers,
and the one check of tool arguments against them, whose texts are the original's."""
from __future__ import annotations

import math
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from bunqueue import errors

Schema = dict[str, Any]
#: A tool: its checked arguments to the text of its result.
Handler = Callable[[dict[str, Any]], Awaitable[str]]
DRAFT_07 = "http://json-schema.org/draft-07/schema#"
#: Where a recursive schema's definition lives, and the name the original gives it.
RECURSIVE_REF = "__schema0"


def string(description: str | None = None, *, url: bool = False) -> Schema:
    return _described({"type": "string", **({"format": "uri"} if url else {})}, description)


def number(description: str | None = None, *, minimum: float | None = None, maximum: float | None = None) -> Schema:
    bounds = {key: value for key, value in (("minimum", minimum), ("maximum", maximum)) if value is not None}
    return _described({"type": "number", **bounds}, description)


def boolean(description: str) -> Schema:
    return _described({"type": "boolean"}, description)


def enum(options: tuple[str, ...], description: str | None = None) -> Schema:
    return _described({"type": "string", "enum": list(options)}, description)


def record(description: str | None = None, values: Schema | None = None) -> Schema:
    """An object with any string keys (``values`` of one schema, or anything)."""
    return _described({"type": "object", "propertyNames": {"type": "string"}, "additionalProperties": values or {}},
                      description)


def array(items: Schema, description: str | None = None, *, min_items: int | None = None) -> Schema:
    return _described({**({"minItems": min_items} if min_items is not None else {}), "type": "array", "items": items},
                      description)


def anything(description: str) -> Schema:
    return {"description": description}


def obj(properties: Mapping[str, Schema], required: tuple[str, ...] = (), description: str | None = None) -> Schema:
    shape: Schema = {"type": "object", "properties": dict(properties)}
    if required:
        shape["required"] = list(required)
    return _described(shape, description)


def recursive(description: str) -> Schema:
    """An array of the tool's recursive definition (a flow's children)."""
    return array({"$ref": f"#/definitions/{RECURSIVE_REF}"}, description)


def _described(shape: Schema, description: str | None) -> Schema:
    return {**shape, "description": description} if description is not None else shape


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    properties: Mapping[str, Schema]
    required: tuple[str, ...]
    run: Handler
    definition: Schema | None = field(default=None)

    @property
    def input_schema(self) -> Schema:
        shape: Schema = {"$schema": DRAFT_07, "type": "object", "properties": dict(self.properties)}
        if self.required:
            shape["required"] = list(self.required)
        if self.definition is not None:
            shape["definitions"] = {RECURSIVE_REF: self.definition}
        return shape

    def check(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """``arguments`` as the tool takes them (unknown keys dropped), or ToolArgumentsError naming every issue."""
        issues: list[str] = []
        _check_object(self.input_schema, arguments, "", issues, self.definition)
        if issues:
            raise ToolArgumentsError(errors.MCP_INVALID_ARGUMENTS.format(name=self.name, issues="\n".join(issues)))
        return {key: value for key, value in arguments.items() if key in self.properties}


class ToolArgumentsError(ValueError):
    """Arguments that do not fit the tool's schema: the call fails before the tool runs."""


def _received(value: Any) -> str:
    """The JSON type of ``value``, in the words of a schema's ``type``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _expected(schema: Schema) -> str:
    """What the original's texts call a schema's type: an object of any keys is a record."""
    kind = str(schema.get("type"))
    return "record" if kind == "object" and "propertyNames" in schema else kind


def _check(schema: Schema, value: Any, path: str, issues: list[str], definition: Schema | None) -> None:
    if "$ref" in schema and definition is not None:
        schema = definition
    kind = schema.get("type")
    if kind is None:
        return
    if _received(value) != kind:
        issues.append(errors.MCP_EXPECTED.format(expected=_expected(schema), received=_received(value), path=path))
        return
    if kind == "number":
        _check_number(schema, value, path, issues)
    elif kind == "string":
        _check_string(schema, value, path, issues)
    elif kind == "array":
        if len(value) < schema.get("minItems", 0):
            issues.append(errors.MCP_TOO_FEW_ITEMS.format(limit=schema["minItems"], path=path))
        for index, item in enumerate(value):
            _check(schema["items"], item, f"{path}[{index}]", issues, definition)
    elif kind == "object":
        if "properties" in schema:
            _check_object(schema, value, path, issues, definition)
        elif schema.get("additionalProperties"):
            for key, item in value.items():
                _check(schema["additionalProperties"], item, f"{path}.{key}" if path else key, issues, definition)


def _check_object(schema: Schema, value: Mapping[str, Any], path: str, issues: list[str],
                  definition: Schema | None) -> None:
    required = schema.get("required", ())
    for key, sub in schema["properties"].items():
        where = f"{path}.{key}" if path else key
        if key not in value or value[key] is None and key not in required:
            if key in required:
                issues.append(errors.MCP_EXPECTED.format(expected=_expected(sub), received="undefined", path=where))
            continue
        _check(sub, value[key], where, issues, definition)


def _check_number(schema: Schema, value: float, path: str, issues: list[str]) -> None:
    if not math.isfinite(value):
        issues.append(errors.MCP_EXPECTED.format(expected="number", received="NaN", path=path))
    elif "minimum" in schema and value < schema["minimum"]:
        issues.append(errors.MCP_TOO_SMALL_NUMBER.format(limit=_plain(schema["minimum"]), path=path))
    elif "maximum" in schema and value > schema["maximum"]:
        issues.append(errors.MCP_TOO_BIG_NUMBER.format(limit=_plain(schema["maximum"]), path=path))


def _check_string(schema: Schema, value: str, path: str, issues: list[str]) -> None:
    options = schema.get("enum")
    if options is not None and value not in options:
        shown = "|".join(f'"{option}"' for option in options)
        issues.append(errors.MCP_BAD_OPTION.format(options=shown, path=path))
    elif schema.get("format") == "uri" and not _is_url(value):
        issues.append(errors.MCP_INVALID_URL.format(path=path))


def _is_url(value: str) -> bool:
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return bool(parts.scheme) and (bool(parts.netloc) or bool(parts.path))


def _plain(limit: float) -> str:
    return str(int(limit)) if float(limit).is_integer() else str(limit)

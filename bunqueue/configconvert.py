"""``bunqueue config convert FILE``: the ``defineConfig({...})`` literal of a Bun config file, as TOML.

Only data converts: strings, numbers, booleans, arrays and nested objects, plus ``process.env.X`` and
``Bun.env.X`` (also ``process.env["X"]``, with ``?? literal`` as a fallback and inside ``Number()``,
``parseInt()`` or ``String()``), which become the references ``"${X}"`` and ``"${X:-literal}"`` the
config file loader reads. ``null`` and ``undefined`` leave a key out, as they let the original fall
through to the environment. Any other expression is refused with its line, never guessed.
"""
from __future__ import annotations

import dataclasses
import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

from bunqueue import configfile

_TOKEN = re.compile(
    r"""(?P<space>\s+|//[^\n]*|/\*.*?\*/)
      |(?P<string>"(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|`(?:[^`\\$]|\\.|\$(?!\{))*`)
      |(?P<number>-?(?:0[xX][0-9a-fA-F_]+|(?:\d[\d_]*)?\.?\d[\d_]*(?:[eE][+-]?\d+)?))
      |(?P<name>[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*)*)
      |(?P<punct>\?\?|[{}\[\]():,!?])
      |(?P<other>.)
    """,
    re.VERBOSE | re.DOTALL,
)
_ENV_OBJECTS = ("process.env", "Bun.env", "import.meta.env")
_WRAPPERS = ("Number", "parseInt", "parseFloat", "String")
_START = re.compile(r"defineConfig\s*\(\s*(?=\{)|export\s+default\s+(?=\{)|module\.exports\s*=\s*(?=\{)")
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


class ConvertError(Exception):
    """The file holds something that is not plain data."""


@dataclasses.dataclass(frozen=True)
class EnvRef:
    name: str
    fallback: str | None = None

    def text(self) -> str:
        return f"${{{self.name}}}" if self.fallback is None else f"${{{self.name}:-{self.fallback}}}"


_ABSENT = object()  # null / undefined: the key is left out


@dataclasses.dataclass
class _Token:
    kind: str
    text: str
    line: int


class _Parser:
    """Reads tokens only as far as the literal goes: what follows it (`);`, other code) is never read."""

    def __init__(self, source: str, start: int) -> None:
        self.source = source
        self.pos = start
        self.next: _Token | None = None

    def _read(self) -> _Token | None:
        while self.pos < len(self.source):
            match = _TOKEN.match(self.source, self.pos)
            assert match is not None  # `other` takes any character
            line = self.source.count("\n", 0, self.pos) + 1
            self.pos = match.end()
            if match.lastgroup != "space":
                return _Token(match.lastgroup or "", match.group(), line)
        return None

    def peek(self, text: str | None = None) -> _Token | None:
        if self.next is None:
            self.next = self._read()
        token = self.next
        if token is not None and text is not None and token.text != text:
            return None
        return token

    def take(self, text: str | None = None) -> _Token:
        token = self.peek()
        if token is None:
            raise ConvertError("the file ends inside the config literal")
        if text is not None and token.text != text:
            raise ConvertError(f"line {token.line}: expected {text!r}, found {token.text!r}")
        self.next = None
        return token

    def value(self) -> Any:
        value = self.primary()
        while self.peek("!") or self.peek("as"):  # `x!` and `x as const` only speak to the type checker
            if self.take().text == "as":
                self.take()
        if self.peek("??"):
            line = self.take().line
            fallback = self.primary()
            if not isinstance(value, EnvRef) or isinstance(fallback, dict | list | EnvRef) or fallback is _ABSENT:
                raise ConvertError(f"line {line}: '??' converts only as process.env.X ?? <literal>")
            value = EnvRef(value.name, _literal_text(fallback))
        return value

    def primary(self) -> Any:
        token = self.take()
        if token.text == "{":
            return self.object()
        if token.text == "[":
            return self.array()
        if token.kind == "string":
            return _string(token)
        if token.kind == "number":
            return _number(token)
        if token.kind == "name":
            return self.named(token)
        raise ConvertError(f"line {token.line}: unexpected {token.text!r}")

    def named(self, token: _Token) -> Any:
        words = {"true": True, "false": False, "null": _ABSENT, "undefined": _ABSENT}
        if token.text in words:
            return words[token.text]
        if token.text in _ENV_OBJECTS:
            self.take("[")
            quoted = self.take()
            self.take("]")
            if quoted.kind != "string":
                raise ConvertError(f"line {quoted.line}: an environment variable is named by a string literal")
            return EnvRef(_string(quoted))
        base, _, name = token.text.rpartition(".")
        if base in _ENV_OBJECTS:
            return EnvRef(name)
        if token.text in _WRAPPERS and self.peek("("):
            self.take("(")
            inner = self.value()
            if self.peek(","):  # parseInt(x, 10)
                self.take(",")
                self.primary()
            self.take(")")
            return inner
        raise ConvertError(f"line {token.line}: {token.text!r} is not plain data (literals and process.env only)")

    def object(self) -> dict[str, Any]:
        body: dict[str, Any] = {}
        while not self.peek("}"):
            key = self.take()
            if key.kind not in ("name", "string") or (key.kind == "name" and "." in key.text):
                raise ConvertError(f"line {key.line}: {key.text!r} is not a key")
            self.take(":")
            value = self.value()
            if value is not _ABSENT:
                body[_string(key) if key.kind == "string" else key.text] = value
            if not self.peek("}"):
                self.take(",")
        self.take("}")
        return body

    def array(self) -> list[Any]:
        items: list[Any] = []
        while not self.peek("]"):
            token = self.peek()
            item = self.value()
            if item is _ABSENT or isinstance(item, dict | list):
                raise ConvertError(f"line {token.line if token else 0}: arrays hold strings, numbers or booleans")
            items.append(item)
            if not self.peek("]"):
                self.take(",")
        self.take("]")
        return items


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}
_ESCAPE = re.compile(r"\\(u\{[0-9a-fA-F]+\}|u[0-9a-fA-F]{4}|x[0-9a-fA-F]{2}|.)", re.DOTALL)


def _unescape(match: re.Match[str]) -> str:
    code = match.group(1)
    if code[0] in "ux" and len(code) > 1:
        return chr(int(code.strip("ux{}"), 16))
    return _ESCAPES.get(code, code)


def _string(token: _Token) -> str:
    return _ESCAPE.sub(_unescape, token.text[1:-1])


def _number(token: _Token) -> int | float:
    text = token.text.replace("_", "")
    try:
        return int(text, 0) if re.fullmatch(r"-?(0[xX][0-9a-fA-F]+|\d+)", text) else float(text)
    except ValueError:
        raise ConvertError(f"line {token.line}: cannot read the number {token.text}") from None


def _literal_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def parse_config_literal(source: str) -> dict[str, Any]:
    """The object literal passed to ``defineConfig`` (or exported as default), as Python data."""
    start = _START.search(source)
    if start is None:
        raise ConvertError("no defineConfig({...}) or `export default {...}` found")
    parser = _Parser(source, start.end())
    parser.take("{")
    return parser.object()


def to_toml(doc: dict[str, Any], header: str = "") -> str:
    lines = [f"# {header}"] if header else []
    _table(doc, [], lines)
    return "\n".join(lines).strip("\n") + "\n"


def _table(body: dict[str, Any], path: list[str], lines: list[str]) -> None:
    scalars = {k: v for k, v in body.items() if not isinstance(v, dict)}
    tables = {k: v for k, v in body.items() if isinstance(v, dict)}
    if path and (scalars or not tables):
        lines += ["", f"[{'.'.join(_key(p) for p in path)}]"]
    lines += [f"{_key(k)} = {_toml_value(v)}" for k, v in scalars.items()]
    for key, sub in tables.items():
        _table(sub, [*path, key], lines)


def _key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, EnvRef):
        return json.dumps(value.text(), ensure_ascii=False)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return repr(value)


def convert_command(file: str, output: str | None) -> int:
    """Print (or write to ``output``) the TOML of ``file``; 1 with one line on stderr when it cannot."""
    path = Path(file)
    try:
        doc = parse_config_literal(path.read_text(encoding="utf-8"))
    except OSError as exc:
        print(f"bunqueue: error: cannot read {path}: {exc.strerror}", file=sys.stderr)
        return 1
    except ConvertError as exc:
        print(f"bunqueue: error: {path}: {exc}", file=sys.stderr)
        return 1
    text = to_toml(doc, f"Converted from {path.name} by `bunqueue config convert`.")
    try:
        configfile.checked_keys(tomllib.loads(text), output or "the converted file")
    except configfile.ConfigFileError as exc:
        print(f"bunqueue: warning: the server will refuse this file: {exc}", file=sys.stderr)
    if output is None:
        sys.stdout.write(text)
        return 0
    try:
        with open(output, "x", encoding="utf-8") as out:
            out.write(text)
    except OSError as exc:
        print(f"bunqueue: error: cannot write {output}: {exc.strerror}", file=sys.stderr)
        return 1
    return 0

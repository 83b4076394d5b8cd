"""Global options of the client subcommands, accepted before or after the subcommand's own words.

`bunqueue push emails '{"a":1}' --json -H 127.0.0.1 -p 6789` and `bunqueue --json push emails '{"a":1}'`
mean the same. `-t` is the token everywhere except after `pull` and `job wait`, where it is their
`--timeout` (as in the Bun original's CLI); `--token` always names the token.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

DEFAULT_HOST = "localhost"
DEFAULT_PORT = 6789
# The original's order: the server's own HOST and TCP_PORT come first, so a client started next to the
# server finds it.
HOST_ENV = ("HOST", "BUNQUEUE_HOST", "BQ_HOST")
PORT_ENV = ("TCP_PORT", "BUNQUEUE_TCP_PORT", "BQ_TCP_PORT")
TOKEN_ENV = ("BQ_TOKEN", "BUNQUEUE_TOKEN")


class UsageError(Exception):
    """The command line itself is wrong: exit status 2, nothing was sent."""


@dataclass
class GlobalOptions:
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    token: str | None = None
    tls: bool = False
    tls_ca: str | None = None
    tls_no_verify: bool = False
    json: bool = False
    help: bool = False
    version: bool = False
    words: list[str] = field(default_factory=list)


def _first_env(env: Mapping[str, str], names: Sequence[str]) -> str | None:
    return next((env[n] for n in names if env.get(n)), None)


def _port(text: str, source: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = 0
    if not 1 <= port <= 65535:
        raise UsageError(f"{source} must be a port number from 1 to 65535 (got {text!r})")
    return port


def _owns_short_t(words: Sequence[str]) -> bool:
    return bool(words) and (words[0] == "pull" or list(words[:2]) == ["job", "wait"])


def _take_value(argv: Sequence[str], i: int, flag: str) -> str:
    if i + 1 >= len(argv):
        raise UsageError(f"{flag} needs a value")
    return argv[i + 1]


def parse_global(argv: Sequence[str], env: Mapping[str, str] | None = None) -> GlobalOptions:
    """Pull the global options out of `argv`; what remains, in order, is `words`."""
    env = os.environ if env is None else env
    opts = GlobalOptions()
    host = port = token = None
    i = 0
    while i < len(argv):
        arg = argv[i]
        name, eq, inline = arg.partition("=")
        if arg == "--":
            opts.words.extend(argv[i + 1:])
            break
        if name in ("--host", "-H", "--port", "-p", "--token", "--tls-ca") or (
                arg == "-t" and not _owns_short_t(opts.words)):
            value = inline if eq else _take_value(argv, i, name)
            i += 0 if eq else 1
            if name in ("--host", "-H"):
                host = value
            elif name in ("--port", "-p"):
                port = _port(value, name)
            elif name == "--tls-ca":
                opts.tls_ca, opts.tls = value, True
            else:
                token = value
        elif arg == "--tls":
            opts.tls = True
        elif arg == "--tls-no-verify":
            opts.tls_no_verify = opts.tls = True
        elif arg == "--json":
            opts.json = True
        elif arg == "--help" or (arg == "-h" and not opts.words):
            opts.help = True
        elif arg == "--version" or (arg == "-v" and not opts.words):
            opts.version = True
        else:
            opts.words.append(arg)
        i += 1
    env_port = _first_env(env, PORT_ENV)
    opts.host = host or _first_env(env, HOST_ENV) or DEFAULT_HOST
    opts.port = port or (_port(env_port, "the port environment variable") if env_port else DEFAULT_PORT)
    opts.token = token or _first_env(env, TOKEN_ENV)
    return opts

"""``bunqueue start``, ``bunqueue config convert`` and the client commands. Server flags mirror the
environment variables of the Bun original and its config file's keys; every other command
(``bunqueue push emails '{"to": "x"}'``) goes to :mod:`bunqueue.remote`."""
from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from collections.abc import Sequence
from typing import Any

from bunqueue import __version__, configfile
from bunqueue.config import OPTIONS, Settings, startup_error

LOCAL_COMMANDS = ("start", "config", "migrate")
LOG_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING, "error": logging.ERROR}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if record.exc_info:
            entry["exc"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def configure_logging(settings: Settings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    level = LOG_LEVELS.get(settings.log_level.lower(), logging.INFO)
    # asyncpg's pool tells of its reconnections: in the server's format, and only from warnings up.
    for name, floor in (("bunqueue", level), ("asyncpg", max(level, logging.WARNING))):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(floor)
        logger.propagate = False


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="bunqueue",
        description="A job-queue broker that speaks the bunqueue wire protocol.",
        epilog="client commands (push, pull, job, queue, dlq, stats, ...): bunqueue help; "
               "MCP server: bunqueue mcp --help",
    )
    parser.add_argument("--version", action="version", version=f"bunqueue {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    start = commands.add_parser(
        "start",
        help="start the server",
        description="Start the server. Flags win over the config file, which wins over the environment.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=_env_table(),
    )
    start.add_argument(
        "-c", "--config", metavar="FILE", default=None,
        help="TOML or JSON config file with the original's sections and keys (default: bunqueue.config.toml "
             "or bunqueue.config.json in the working directory)",
    )
    for opt in OPTIONS:
        if opt.flag is None:
            continue
        env = ", ".join(opt.env)
        default = _shown_default(opt.default)
        start.add_argument(
            opt.flag, dest=opt.field, default=None, metavar=opt.field.upper(),
            help=f"{opt.help} (default: {default}; env: {env})",
        )
    config = commands.add_parser("config", help="config file tools")
    tools = config.add_subparsers(dest="tool", metavar="TOOL", required=True)
    convert = tools.add_parser(
        "convert", help="write the TOML equivalent of a bunqueue.config.ts/js/mjs",
        description="Translate the defineConfig({...}) literal of the original's config file to TOML; "
                    "process.env.X and Bun.env.X become \"${X}\" references.",
    )
    convert.add_argument("file", metavar="FILE")
    convert.add_argument("-o", "--output", metavar="OUT", help="write to OUT (refused if it exists) "
                                                                  "instead of standard output")
    migrate = commands.add_parser(
        "migrate",
        help="convert a data file of the Bun server",
        description="Convert a SQLite data file written by the Bun server (2.x) into this server's format."
        " The same file as --from and --to converts it in place, keeping the original as"
        " FILE.bun-<version>.bak (as a start on that file does).",
    )
    migrate.add_argument("--from", dest="source", required=True, metavar="FILE", help="the Bun server's data file")
    migrate.add_argument("--to", dest="target", required=True, metavar="FILE", help="the file to write")
    migrate.add_argument("--json", action="store_true", help="print the summary as JSON")
    return parser


def _shown_default(value: object) -> object:
    if value is None:
        return "unset"
    return "empty" if value == "" else value


def _env_table() -> str:
    rows = ["settings read from the environment only:"]
    for opt in OPTIONS:
        if opt.flag is None:
            default = "" if opt.default is None else f" (default: {_shown_default(opt.default)})"
            rows.append(f"  {opt.env[0]:<28} {opt.help}{default}")
    return "\n".join(rows)


class ListenFailed(Exception):
    """A listener could not be opened; the message is the line the server logs."""


async def _serve(settings: Settings) -> None:
    from bunqueue.server.app import open_server
    server = await open_server(settings)
    try:
        await server.start()
    except OSError as exc:
        # A port taken or an address this host does not have: what was opened is closed again.
        await server.shutdown()
        raise ListenFailed(f"Failed to start server: {exc.strerror or exc}") from exc
    host, port = server.tcp_address
    storage = settings.storage if settings.storage != "sqlite" else f"sqlite {settings.data_path}"
    logging.getLogger("bunqueue").info(
        "bunqueue %s listening on tcp://%s:%d (storage: %s, auth: %s)",
        __version__, host, port, storage, "on" if settings.tokens else "off",
    )
    await server.serve_until_stopped()


def _run(settings: Settings) -> None:
    try:
        import uvloop
    except ImportError:  # pragma: no cover - uvloop is a dependency on every supported platform
        asyncio.run(_serve(settings))
    else:
        uvloop.run(_serve(settings))


def _client_command(argv: Sequence[str]) -> bool:
    from bunqueue.remote.argv import UsageError, parse_global

    try:
        words = parse_global(argv, env={}).words
    except UsageError:
        return True  # a client option gone wrong: let the client say what
    return bool(words) and words[0] not in LOCAL_COMMANDS and not words[0].startswith("-")


def _refuse(message: str) -> int:
    """A start that cannot go ahead: one line on stderr, exit status 1."""
    print(f"bunqueue: error: {message}", file=sys.stderr)
    return 1


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["mcp"]:
        from bunqueue.mcp.launch import main as mcp_main

        return mcp_main(words[1:], prog="bunqueue mcp")
    if _client_command(words):
        from bunqueue.remote.run import main as client_main

        return client_main(list(sys.argv[1:] if argv is None else argv))
    words = list(sys.argv[1:] if argv is None else argv)
    if not words or words[0] not in (*LOCAL_COMMANDS, "--version", "-h", "--help"):
        # `bunqueue` alone, or followed by server flags, starts the server, as the original does.
        words = ["start", *words]
    parser = build_parser()
    args = parser.parse_args(words)
    if args.command == "migrate":
        from bunqueue.migrate import run

        return run(args.source, args.target, args.json)
    if args.command == "config":
        from bunqueue.configconvert import convert_command

        return convert_command(args.file, args.output)
    fields = {opt.field for opt in OPTIONS}
    flags = {k: v for k, v in vars(args).items() if k in fields and v is not None}
    try:
        path = configfile.discover(args.config)
        file = configfile.implied_driver(configfile.load(path) if path else {}, flags)
    except configfile.ConfigFileError as exc:
        return _refuse(str(exc))
    try:
        settings = Settings.load(flags, file=file)
        _ = settings.storage, settings.tls_files
    except ValueError as exc:
        parser.error(str(exc))
    configure_logging(settings)
    if path is not None:
        logging.getLogger("bunqueue").info("settings from %s", path)
    problem = startup_error(settings)
    if problem is not None:
        logging.getLogger("bunqueue").error("%s", problem)
        return 1
    from bunqueue.backup.config import startup_error as backup_startup_error

    refusal = backup_startup_error(settings)
    if refusal is not None:
        logging.getLogger("bunqueue").error(refusal)
        return 1
    from bunqueue.server.tls import TlsConfigError
    from bunqueue.storage.postgres.errors import StartupFailed
    from bunqueue.storage.schema import StorageError

    try:
        _run(settings)
    except (StartupFailed, ListenFailed) as exc:
        logging.getLogger("bunqueue").error("%s", exc)
        return 1
    except StorageError as exc:
        logging.getLogger("bunqueue").error("cannot open the data file: %s", exc)
        return 1
    except TlsConfigError as exc:
        logging.getLogger("bunqueue").error("cannot start TLS: %s", exc)
        return 1
    return 0

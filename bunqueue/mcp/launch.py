"""The ``bunqueue-mcp`` command: options, the mode from the environment, and a hint when the SDK is missing."""
from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Sequence

INSTALL_HINT = ("[bunqueue-mcp] The MCP server requires the MCP SDK (the 'mcp' extra).\n"
                "Install it with:  pip install 'bunqueue[mcp]'\n")
DEFAULT_HTTP_HOST = "127.0.0.1"
DEFAULT_HTTP_PORT = 6791
DEFAULT_HTTP_PATH = "/mcp"


def build_parser(prog: str = "bunqueue-mcp") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Model Context Protocol server for bunqueue (stdio unless --http). Mode from the "
                    "environment: BUNQUEUE_MODE=embedded (default; DATA_PATH for SQLite) or tcp "
                    "(BUNQUEUE_HOST, BUNQUEUE_PORT, BUNQUEUE_TOKEN, BUNQUEUE_POOL_SIZE).",
    )
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    parser.add_argument("--http-host", default=DEFAULT_HTTP_HOST, help=f"(default: {DEFAULT_HTTP_HOST})")
    parser.add_argument("--http-port", type=int, default=DEFAULT_HTTP_PORT, help=f"(default: {DEFAULT_HTTP_PORT})")
    parser.add_argument("--http-path", default=DEFAULT_HTTP_PATH, help=f"(default: {DEFAULT_HTTP_PATH})")
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "bunqueue-mcp") -> int:
    args = build_parser(prog).parse_args(argv)
    try:
        from bunqueue.mcp.adapter import Mode
        from bunqueue.mcp.server import serve_http, serve_stdio
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in ("mcp", "mcp_types"):
            sys.stderr.write(INSTALL_HINT)
            return 1
        raise
    try:
        mode = Mode.from_env()
    except ValueError as exc:
        sys.stderr.write(f"bunqueue-mcp: {exc}\n")
        return 2
    try:
        if args.http:
            asyncio.run(serve_http(mode, args.http_host, args.http_port, args.http_path))
        else:
            asyncio.run(serve_stdio(mode))
    except KeyboardInterrupt:
        return 0
    except (OSError, ConnectionError) as exc:
        sys.stderr.write(f"Fatal error: {exc}\n")
        return 1
    return 0

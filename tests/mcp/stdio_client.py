"""An MCP client on ``bunqueue-mcp`` over stdio, as an agent's host runs it."""
from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client


class McpClient:
    """A session on one MCP server process, with the calls the tests make."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def tool(self, name: str, arguments: dict[str, Any] | None = None) -> tuple[str, bool]:
        """(text of the result, whether it is an error)."""
        result = await self.session.call_tool(name, arguments or {})
        assert len(result.content) == 1, result
        return result.content[0].text, bool(result.is_error)  # type: ignore[union-attr]

    async def ok(self, name: str, arguments: dict[str, Any] | None = None) -> Any:
        """The JSON of a tool that must succeed."""
        text, is_error = await self.tool(name, arguments)
        assert not is_error, text
        return json.loads(text)

    async def error(self, name: str, arguments: dict[str, Any] | None = None) -> str:
        """The text of a tool that must fail."""
        text, is_error = await self.tool(name, arguments)
        assert is_error, text
        return text

    async def resource(self, uri: str) -> Any:
        result = await self.session.read_resource(uri)
        (content,) = result.contents
        assert content.mime_type == "application/json"
        return json.loads(content.text)  # type: ignore[union-attr]


@asynccontextmanager
async def mcp_server(env: dict[str, str] | None = None, args: list[str] | None = None) -> AsyncIterator[McpClient]:
    """``python -m bunqueue mcp`` over stdio (embedded in memory unless ``env`` says otherwise)."""
    full_env = {key: value for key, value in os.environ.items() if not key.startswith("BUNQUEUE_")}
    for name in ("DATA_PATH", "SQLITE_PATH", "BQ_DATA_PATH"):
        full_env.pop(name, None)
    full_env.update(env or {})
    params = StdioServerParameters(command=sys.executable, args=["-m", "bunqueue", "mcp", *(args or [])],
                                   env=full_env)
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield McpClient(session)

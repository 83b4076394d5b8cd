"""The MCP server: every tool, resource and prompt over stdio, or over streamable HTTP with ``--http``."""
from __future__ import annotations

import json
import logging
import sys
from contextlib import AsyncExitStack
from typing import Any

import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

from bunqueue import __version__, errors
from bunqueue.mcp.adapter import Adapter, Mode, ToolFailure
from bunqueue.mcp.handlers import HandlerRegistry
from bunqueue.mcp.prompts import Prompt, prompts
from bunqueue.mcp.resources import MIME_JSON, Resource, resources
from bunqueue.mcp.schema import Tool, ToolArgumentsError
from bunqueue.mcp.tools import all_tools

SERVER_NAME = "bunqueue-mcp"
#: The JSON-RPC code the original's tool errors for bad arguments and unknown tools carry in their text.
INVALID_PARAMS = -32602
log = logging.getLogger("bunqueue.mcp")


def _text_result(text: str, is_error: bool = False) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=is_error)


def _protocol_error(message: str) -> types.CallToolResult:
    return _text_result(f"MCP error {INVALID_PARAMS}: {message}", is_error=True)


class BunqueueMcp:
    """The tools, resources and prompts of one adapter, and the MCP server that offers them."""

    def __init__(self, adapter: Adapter) -> None:
        self.adapter = adapter
        self.handlers = HandlerRegistry(adapter)
        self.tools: dict[str, Tool] = {tool.name: tool for tool in all_tools(adapter, self.handlers)}
        self.resources: dict[str, Resource] = {res.uri: res for res in resources(adapter)}
        self.prompts: dict[str, Prompt] = {prompt.name: prompt for prompt in prompts(adapter)}
        self.server: Server[Any] = Server(
            SERVER_NAME, version=__version__,
            on_list_tools=self._list_tools, on_call_tool=self._call_tool,
            on_list_resources=self._list_resources, on_read_resource=self._read_resource,
            on_list_prompts=self._list_prompts, on_get_prompt=self._get_prompt,
        )

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[
            types.Tool(name=tool.name, description=tool.description, input_schema=tool.input_schema)
            for tool in self.tools.values()
        ])

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        tool = self.tools.get(name)
        if tool is None:
            return _protocol_error(errors.MCP_UNKNOWN_TOOL.format(name=name))
        try:
            text = await tool.run(tool.check(arguments))
        except ToolArgumentsError as exc:
            return _protocol_error(str(exc))
        except ToolFailure as exc:
            return _text_result(json.dumps(exc.payload, separators=(",", ":")), is_error=True)
        except Exception as exc:  # noqa: BLE001 - a tool that fails reports why, as the original's do
            log.debug("tool %s failed", name, exc_info=True)
            return _text_result(json.dumps({"error": str(exc)}, separators=(",", ":")), is_error=True)
        return _text_result(text)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await self.call_tool(params.name, dict(params.arguments or {}))

    async def _list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        return types.ListResourcesResult(resources=[
            types.Resource(uri=res.uri, name=res.name, description=res.description, mime_type=MIME_JSON)
            for res in self.resources.values()
        ])

    async def _read_resource(self, ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        uri = str(params.uri)
        res = self.resources.get(uri)
        if res is None:
            raise ValueError(f"Resource {uri} not found")
        return types.ReadResourceResult(contents=[
            types.TextResourceContents(uri=uri, text=await res.text(), mime_type=MIME_JSON),
        ])

    async def _list_prompts(self, ctx: Any, params: Any) -> types.ListPromptsResult:
        return types.ListPromptsResult(prompts=[
            types.Prompt(name=p.name, description=p.description, arguments=[
                types.PromptArgument(name=arg.name, description=arg.description, required=arg.required)
                for arg in p.arguments
            ] or None)
            for p in self.prompts.values()
        ])

    async def _get_prompt(self, ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        prompt = self.prompts.get(params.name)
        if prompt is None:
            raise ValueError(f"Prompt {params.name} not found")
        arguments = dict(params.arguments or {})
        for arg in prompt.arguments:
            if arg.required and not isinstance(arguments.get(arg.name), str):
                raise ValueError(errors.MCP_INVALID_ARGUMENTS.format(
                    name=prompt.name, issues=errors.MCP_EXPECTED.format(
                        expected="string", received="undefined", path=arg.name)))
        description, text = await prompt.messages(arguments)
        return types.GetPromptResult(description=description, messages=[
            types.PromptMessage(role="user", content=types.TextContent(type="text", text=text)),
        ])

    async def close(self) -> None:
        await self.handlers.close()
        await self.adapter.close()


async def serve_stdio(mode: Mode) -> None:
    async with AsyncExitStack() as stack:
        app = await _open(mode, stack)
        async with stdio_server() as (read_stream, write_stream):
            print(f"bunqueue MCP server started (mode: {mode.name}, version: {__version__})", file=sys.stderr)
            await app.server.run(read_stream, write_stream, app.server.create_initialization_options())


async def serve_http(mode: Mode, host: str, port: int, path: str) -> None:
    import uvicorn

    async with AsyncExitStack() as stack:
        app = await _open(mode, stack)
        web = app.server.streamable_http_app(streamable_http_path=path, host=host)
        config = uvicorn.Config(web, host=host, port=port, log_level="warning", lifespan="on")
        print(f"bunqueue MCP server started (mode: {mode.name}, version: {__version__}) on http://{host}:{port}{path}",
              file=sys.stderr)
        await uvicorn.Server(config).serve()


async def _open(mode: Mode, stack: AsyncExitStack) -> BunqueueMcp:
    adapter = Adapter.open(mode)
    stack.push_async_callback(adapter.close)
    await adapter.connect()
    app = BunqueueMcp(adapter)
    stack.push_async_callback(app.handlers.close)
    return app

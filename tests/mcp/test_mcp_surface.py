"""The server's tools, resources and prompts against the original's, recorded from bunqueue 2.9.5."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.mcp.stdio_client import mcp_server

RECORDED = json.loads((Path(__file__).parent / "original_2.9.5.json").read_text())
#: What a schema says about the values it takes; descriptions and the draft marker are left out.
CONSTRAINTS = ("type", "minimum", "maximum", "minItems", "enum", "format", "$ref")


def skeleton(schema: Any) -> Any:
    """A schema's property names, types, ranges and required sets, at every depth."""
    if not isinstance(schema, dict):
        return schema
    shape: dict[str, Any] = {key: schema[key] for key in CONSTRAINTS if key in schema}
    if "properties" in schema:
        shape["properties"] = {name: skeleton(sub) for name, sub in schema["properties"].items()}
        shape["required"] = sorted(schema.get("required", []))
    for key in ("items", "additionalProperties", "propertyNames"):
        if key in schema:
            shape[key] = skeleton(schema[key])
    if "definitions" in schema:
        shape["definitions"] = {name: skeleton(sub) for name, sub in schema["definitions"].items()}
    return shape


async def test_every_tool_of_the_original_with_the_same_inputs() -> None:
    async with mcp_server() as embedded:
        listed = {tool.name: tool for tool in (await embedded.session.list_tools()).tools}
        recorded = {tool["name"]: tool for tool in RECORDED["tools"]}
        assert len(recorded) == 73
        assert sorted(listed) == sorted(recorded)
        for name, tool in recorded.items():
            ours = listed[name].input_schema
            assert skeleton(ours) == skeleton(tool["inputSchema"]), name
            assert sorted(ours.get("required", [])) == sorted(tool["inputSchema"].get("required", [])), name
            assert listed[name].description == tool["description"], name


async def test_the_same_resources_and_prompts() -> None:
    async with mcp_server() as embedded:
        resources = (await embedded.session.list_resources()).resources
        assert [(str(r.uri), r.name, r.description, r.mime_type) for r in resources] == [
            (r["uri"], r["name"], r["description"], r["mimeType"]) for r in RECORDED["resources"]]
        prompts = (await embedded.session.list_prompts()).prompts
        assert [p.name for p in prompts] == [p["name"] for p in RECORDED["prompts"]]
        for ours, theirs in zip(prompts, RECORDED["prompts"]):
            assert ours.description == theirs["description"]
            arguments = [(a.name, a.description, bool(a.required)) for a in ours.arguments or []]
            assert arguments == [(a["name"], a["description"], a["required"]) for a in theirs.get("arguments", [])]


async def test_arguments_outside_the_schema_fail_with_the_original_texts() -> None:
    async with mcp_server() as embedded:
        prefix = "MCP error -32602: Input validation error: Invalid arguments for tool"
        assert await embedded.error("bunqueue_update_progress", {"jobId": "x", "progress": 200}) == (
            f"{prefix} bunqueue_update_progress: Too big: expected number to be <=100 at progress")
        assert await embedded.error("bunqueue_add_job", {}) == (
            f"{prefix} bunqueue_add_job: Invalid input: expected string, received undefined at queue\n"
            "Invalid input: expected string, received undefined at name\n"
            "Invalid input: expected record, received undefined at data")
        assert await embedded.error("bunqueue_add_job", {"queue": 5, "name": "n", "data": {}}) == (
            f"{prefix} bunqueue_add_job: Invalid input: expected string, received number at queue")
        assert await embedded.error("bunqueue_get_jobs", {"queue": "q", "state": "zzz"}) == (
            f'{prefix} bunqueue_get_jobs: Invalid option: expected one of '
            '"waiting"|"delayed"|"active"|"completed"|"failed" at state')
        assert await embedded.error("bunqueue_ack_job_batch", {"jobIds": []}) == (
            f"{prefix} bunqueue_ack_job_batch: Too small: expected array to have >=1 items at jobIds")
        assert await embedded.error("bunqueue_pull_job", {"queue": "q", "timeoutMs": -1}) == (
            f"{prefix} bunqueue_pull_job: Too small: expected number to be >=0 at timeoutMs")
        assert await embedded.error("bunqueue_add_webhook", {"url": "notaurl", "events": ["job.completed"]}) == (
            f"{prefix} bunqueue_add_webhook: Invalid URL at url")
        final = {"name": "f", "queueName": "q", "data": {}}
        bulk_then = {"parallel": [{"name": "a", "queueName": "q"}], "final": final}
        assert await embedded.error("bunqueue_add_flow_bulk_then", bulk_then) == (
            f"{prefix} bunqueue_add_flow_bulk_then: "
            "Invalid input: expected record, received undefined at parallel[0].data")
        assert await embedded.error("bunqueue_nope") == "MCP error -32602: Tool bunqueue_nope not found"


def test_bunqueue_start_does_not_import_the_mcp_server() -> None:
    probe = ("import sys, bunqueue.cli, bunqueue.server.app, bunqueue.server.runner; "
             "print(sorted(m for m in sys.modules if m.startswith(('bunqueue.mcp', 'mcp'))))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"

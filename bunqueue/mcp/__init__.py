"""``bunqueue mcp`` / ``bunqueue-mcp``: a Model Context Protocol server that lets an agent run the queue.

It offers the original's 73 tools, 5 resources and 3 prompts, over stdio (the default) or streamable HTTP
(``--http``), on the engine in this process (embedded mode) or on a running server (``BUNQUEUE_MODE=tcp``).
The MCP SDK is the ``mcp`` extra (``pip install 'bunqueue[mcp]'``); nothing here is imported by
``bunqueue start``.
"""

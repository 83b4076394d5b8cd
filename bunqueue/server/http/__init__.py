"""The HTTP API on `--http-port`: health probes, Prometheus, REST routes, SSE streams and a WebSocket.

Every REST route is a translation: `routes` turns a method, path, query and JSON body into one protocol
command, which runs through the same command runner as a TCP frame (auth, rate limit and job rules
live there, not here), and picks the HTTP status from the reply. `connection` parses HTTP/1.1 (httptools);
`api` answers a request: preflight and CORS, bearer tokens, body parsing, and the answers that are not
commands (`answers`). `app` and `streams` serve SSE and the WebSocket on aiohttp, loaded by the first one.
"""

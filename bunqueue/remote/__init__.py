"""The command-line client: `bunqueue push|pull|job|queue|... ` against a running server.

`argv` splits the global options from a subcommand's own words, `requests` turns those words into one
protocol request (the table of subcommands), `render` prints a reply as text or JSON, and `run` ties them
to a connection. The server side lives elsewhere; this package only speaks the wire protocol.
"""

"""Commands to state changes over the compiled core (``Wiring`` in ``bunqueue.broker.wiring``); knows
nothing of sockets. Imports nothing, so that importing one broker module loads only what it uses."""

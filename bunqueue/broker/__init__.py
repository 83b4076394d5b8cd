"""Commands to state changes over the compiled core (``Broker`` in ``bunqueue.broker.broker``); knows
nothing of sockets. Imports nothing, so that importing one broker module loads only what it uses."""

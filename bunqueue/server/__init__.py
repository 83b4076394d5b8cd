"""Sockets, listeners and timers around the broker. Knows nothing of job rules."""

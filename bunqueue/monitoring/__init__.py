"""What the broker is doing, for people and other systems: counters, Prometheus, dashboards, webhooks.

Nothing here touches a socket: the server renders and delivers what these modules compute.
"""

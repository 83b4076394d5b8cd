"""Webhooks: the registry and its outboxes (registry.py), the URL rules (urls.py), delivery from a thread of its
own (delivery.py) and its aiohttp client (client.py, loaded with the first webhook). Imports nothing."""

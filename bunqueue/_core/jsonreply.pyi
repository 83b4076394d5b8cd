from typing import Any

class JsonWriter:
    def plain_json(self, value: Any) -> bytes | None: ...

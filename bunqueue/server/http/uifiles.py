"""The dashboard's files under `/ui/`: shipped in the package (bunqueue/ui/), read once, served from memory.

Only the files that the folder holds when the first request comes can be answered: a path is looked up by
name in that set, never joined onto a folder, so no `..` or escape reaches the disk. Files are under
`/ui/static/<name>`; a missing one there is 404 (a script must never receive the page instead). Every other
path under `/ui/` is the page itself, so that a deep link (`/ui/jobs/<id>`) loads the app, which reads the
path. `/ui/static/config.json` tells the page whether the API wants a token, so that it asks for one before
its first request rather than after a refusal. Answers carry an ETag and `Cache-Control: no-cache`: names
are not content-hashed, so a browser revalidates and gets `304` while a file is unchanged.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from importlib import resources

from bunqueue._core.httpresponse import HttpResponse

PREFIX = "/ui"
STATIC = "/ui/static/"
PAGE = "index.html"
CONFIG = "config.json"
TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".json": "application/json",
}
# What the page may load and run: its own files and its own API, nothing inline, nothing from elsewhere.
SECURITY = {
    "Content-Security-Policy": "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                               "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


@dataclass(frozen=True)
class UiFile:
    body: bytes
    content_type: str
    etag: str


def is_ui_path(path: str) -> bool:
    return path == PREFIX or path.startswith(PREFIX + "/")


def _file(body: bytes, content_type: str) -> UiFile:
    return UiFile(body, content_type, '"' + hashlib.sha256(body).hexdigest()[:20] + '"')


def _load(auth: bool) -> dict[str, UiFile]:
    files = {CONFIG: _file(json.dumps({"auth": auth}).encode(), TYPES[".json"])}
    for entry in resources.files("bunqueue").joinpath("ui").iterdir():
        content_type = TYPES.get("." + entry.name.rpartition(".")[2])
        if entry.is_file() and content_type is not None:
            files[entry.name] = _file(entry.read_bytes(), content_type)
    return files


class UiFiles:
    def __init__(self, auth: bool) -> None:
        self.auth = auth
        self.files: dict[str, UiFile] | None = None

    def answer(self, path: str, if_none_match: str | None) -> HttpResponse:
        """The answer to a GET or HEAD of a path under `/ui`."""
        if path == PREFIX:
            return HttpResponse(308, b"", None, {"Location": PREFIX + "/"})
        if self.files is None:
            self.files = _load(self.auth)
        if path.startswith(STATIC):
            found = self.files.get(path[len(STATIC):])
            if found is None:
                return HttpResponse(404, b"Not Found", "text/plain;charset=utf-8", SECURITY)
        else:
            found = self.files[PAGE]
        headers = {"Cache-Control": "no-cache", "ETag": found.etag, **SECURITY}
        if if_none_match is not None and found.etag in (tag.strip() for tag in if_none_match.split(",")):
            return HttpResponse(304, b"", None, headers)
        return HttpResponse(200, found.body, found.content_type, headers)

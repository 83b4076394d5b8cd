"""HttpResponse.message: the head's layout byte for byte, the cached parts reused across answers, and a model
test against a plain formatting of the same answer."""
from __future__ import annotations

import re
from email.utils import formatdate
from http import HTTPStatus

from hypothesis import given, settings
from hypothesis import strategies as st

from bunqueue._core.httpresponse import JSON_TYPE, TEXT_TYPE, FixedHeaders, HttpResponse

DATE = re.compile(rb"Date: ([^\r]+)\r\n")


def without_date(message: bytes) -> bytes:
    return DATE.sub(b"Date: -\r\n", message)


def test_an_answer_is_laid_out_as_the_original_lays_it_out():
    answer = HttpResponse(200, b'{"ok":true}', JSON_TYPE, FixedHeaders({"Access-Control-Allow-Origin": "*"}))
    message = answer.message(True, "1.1", True)
    assert without_date(message) == (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n"
                                     b"Access-Control-Allow-Origin: *\r\nDate: -\r\n\r\n{\"ok\":true}")
    # The Date is the current second's, in the RFC 9110 format.
    (date,) = DATE.findall(message)
    assert date.endswith(b" GMT") and len(date) == len(formatdate(0, usegmt=True))


def test_close_keep_alive_head_and_bodyless_statuses():
    answer = HttpResponse(404, b"nope", TEXT_TYPE)
    assert without_date(answer.message(False, "1.1", True)).endswith(b"Date: -\r\nConnection: close\r\n\r\nnope")
    assert without_date(answer.message(True, "1.0", True)).endswith(b"Connection: keep-alive\r\n\r\nnope")
    # HEAD: the length of the body it would have, no body.
    assert without_date(answer.message(True, "1.1", False)) == (
        b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain;charset=utf-8\r\nContent-Length: 4\r\nDate: -\r\n\r\n")
    # 204 and 304 carry no length; no content type when there is none.
    assert without_date(HttpResponse(204, b"", None, {"Allow": "GET"}).message(True, "1.1", True)) == (
        b"HTTP/1.1 204 No Content\r\nAllow: GET\r\nDate: -\r\n\r\n")
    assert b"Content-Length" not in HttpResponse(304, b"", None).message(True, "1.1", True)


def test_fixed_headers_are_told_apart_by_their_own_number():
    one, two = FixedHeaders({"X-A": "1"}), FixedHeaders({"X-A": "2"})
    assert one.serial != two.serial
    assert b"X-A: 1\r\n" in HttpResponse(200, b"", JSON_TYPE, one).message(True, "1.1", True)
    assert b"X-A: 2\r\n" in HttpResponse(200, b"", JSON_TYPE, two).message(True, "1.1", True)


def plain(status: int, body: bytes, content_type: str | None, headers: dict[str, str] | None, keep_alive: bool,
          version: str, with_body: bool) -> bytes:
    """The same answer formatted line by line."""
    reason = HTTPStatus(status).phrase
    lines = [f"HTTP/1.1 {status} {reason}"]
    if content_type is not None:
        lines.append(f"Content-Type: {content_type}")
    if status not in (204, 304):
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    lines.append("Date: -")
    if not keep_alive:
        lines.append("Connection: close")
    elif version == "1.0":
        lines.append("Connection: keep-alive")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (body if with_body else b"")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(
    st.sampled_from([200, 201, 204, 304, 400, 401, 404, 413, 429, 500, 503]),
    st.binary(max_size=200),
    st.sampled_from([JSON_TYPE, TEXT_TYPE, None]),
    st.sampled_from([None, {}, {"X-A": "1"}, {"X-A": "1", "X-B": "two"}, "fixed"]),
    st.booleans(), st.sampled_from(["1.1", "1.0"]), st.booleans()), min_size=1, max_size=20))
def test_model_every_message_matches_a_plain_formatting(answers):
    fixed = FixedHeaders({"Access-Control-Allow-Origin": "*"})
    for status, body, content_type, headers, keep_alive, version, with_body in answers:
        extra = fixed if headers == "fixed" else headers
        message = HttpResponse(status, body, content_type, extra).message(keep_alive, version, with_body)
        assert without_date(message) == plain(status, body, content_type, extra, keep_alive, version, with_body)

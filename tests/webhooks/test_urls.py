"""SSRF rules for webhook URLs, as the URL standard reads hosts."""
from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bunqueue import errors
from bunqueue.webhooks.urls import webhook_url_error

PRIVATE_V4 = [ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16",
                                                   "0.0.0.0/8", "127.0.0.0/8")]


@pytest.mark.parametrize("url", [
    "https://example.com/hook", "http://example.com:8080/a?b=c", "https://8.8.8.8/x", "http://172.32.0.1/",
    "https://[2001:db8::1]:8443/x", "https://user:pw@example.com/x", "http://[::ffff:8.8.8.8]/",
    # Just outside the refused ranges.
    "http://172.15.255.255/", "http://192.169.0.1/", "http://169.255.0.1/", "http://[fec0::1]/",
])
def test_public_urls_pass(url: str) -> None:
    assert webhook_url_error(url) is None


@pytest.mark.parametrize(("url", "error"), [
    ("http://017700000001/", errors.WEBHOOK_URL_LOCALHOST),
    ("http://127.1/", errors.WEBHOOK_URL_LOCALHOST),
    ("http://0x0a000001/", errors.WEBHOOK_URL_PRIVATE),
    ("http://LOCALHOST./", errors.WEBHOOK_URL_LOCALHOST),
    ("http://example.com@127.0.0.1/", errors.WEBHOOK_URL_LOCALHOST),
    ("http://1.2.3.4.5/", errors.WEBHOOK_URL_INVALID),
    ("http://256.0.0.1/", errors.WEBHOOK_URL_INVALID),
    ("http://example.com:99999/", errors.WEBHOOK_URL_INVALID),
    ("http://[fe80::1%25eth0]/", errors.WEBHOOK_URL_LINK_LOCAL),
    ("javascript:alert(1)", errors.WEBHOOK_URL_SCHEME),
    # IPv4-compatible IPv6 in hex, the long form of IPv4-mapped, the rest of 0.0.0.0/8, nested .localhost.
    ("http://[::7f00:1]/", errors.WEBHOOK_URL_LOOPBACK),
    ("http://[::a00:1]/", errors.WEBHOOK_URL_PRIVATE),
    ("http://[0:0:0:0:0:ffff:7f00:1]/", errors.WEBHOOK_URL_LOOPBACK),
    ("http://[::ffff:c0a8:1]/", errors.WEBHOOK_URL_PRIVATE),
    ("http://0.1.2.3/", errors.WEBHOOK_URL_UNSPECIFIED),
    ("http://foo.bar.localhost/", errors.WEBHOOK_URL_LOCALHOST),
    ("http://[fd00::1]/", errors.WEBHOOK_URL_PRIVATE_ULA),
    ("http://[febf::1]/", errors.WEBHOOK_URL_LINK_LOCAL),
    ("http://METADATA.GOOGLE.INTERNAL/", errors.WEBHOOK_URL_METADATA),
])
def test_tricky_spellings(url: str, error: str) -> None:
    assert webhook_url_error(url) == error


def test_allow_private_keeps_metadata_refused() -> None:
    assert webhook_url_error("http://127.0.0.1:8080/x", allow_private=True) is None
    assert webhook_url_error("http://10.0.0.1/x", allow_private=True) is None
    assert webhook_url_error("http://169.254.169.254/", allow_private=True) == errors.WEBHOOK_URL_METADATA
    assert webhook_url_error("ftp://10.0.0.1/", allow_private=True) == errors.WEBHOOK_URL_SCHEME


@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_every_ipv4_spelling_is_judged_by_its_address(value: int) -> None:
    address = ipaddress.IPv4Address(value)
    blocked = any(address in net for net in PRIVATE_V4)
    for host in (str(address), str(value), hex(value), f"[::ffff:{address}]"):
        error = webhook_url_error(f"http://{host}/")
        assert (error is not None) == blocked, (host, error)

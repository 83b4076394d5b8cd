"""Which webhook URLs are accepted: SSRF rules for AddWebhook.

The host is classified as a browser would read it (the WHATWG URL rules the reference relies on), so that
``http://2130706433/``, ``http://0x7f.1/`` and ``http://[::ffff:7f00:1]/`` are all seen as 127.0.0.1.
No DNS lookup happens here: a name is judged by its spelling, as in the reference.
"""
from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit

from bunqueue import errors

MAX_URL_LENGTH = 2048
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
# Characters a WHATWG host may not contain (forbidden host code points).
_FORBIDDEN_HOST = re.compile(r"[\x00-\x20#%/:<>?@\[\\\]^|]")
METADATA_HOSTS = ("169.254.169.254", "metadata.google.internal")


def _missing(value: object) -> bool:
    """Whether a non-string ``url`` counts as not given: the reference's ``!url || url.length === 0``
    (null, false, 0, NaN, an empty array). Any other value is a URL that does not parse."""
    if value is None or value is False:
        return True
    if type(value) in (int, float):
        return value == 0 or value != value
    return type(value) is list and not value


def webhook_url_error(url: object, allow_private: bool = False) -> str | None:
    """The reason ``url`` is refused, or None. ``allow_private`` admits loopback and private networks
    (never the cloud metadata endpoints): for tests and receivers on the broker's own network."""
    if type(url) is not str:
        return errors.WEBHOOK_URL_REQUIRED if _missing(url) else errors.WEBHOOK_URL_INVALID
    if not url:
        return errors.WEBHOOK_URL_REQUIRED
    if len(url) > MAX_URL_LENGTH:
        return errors.WEBHOOK_URL_TOO_LONG
    host = _host(url)
    if host is None:
        return errors.WEBHOOK_URL_INVALID
    if host == "":
        return errors.WEBHOOK_URL_SCHEME
    if not allow_private:
        error = _local_host_error(host)
        if error is not None:
            return error
    if host in METADATA_HOSTS or host.endswith(".internal"):
        return errors.WEBHOOK_URL_METADATA
    return None


def address_error(address: str) -> str | None:
    """Why a resolved address may not receive webhooks (loopback, private, link-local, ...), or None."""
    return _local_host_error(address)


def _local_host_error(host: str) -> str | None:
    if host == "localhost" or host.endswith(".localhost"):
        return errors.WEBHOOK_URL_LOCALHOST
    address = _ip(host)
    if address is None:
        return None
    if address.version == 6:
        return _ipv6_error(address)  # type: ignore[arg-type]
    return _ipv4_error(address)  # type: ignore[arg-type]


def _host(url: str) -> str | None:
    """The lower-cased host of an http(s) URL; "" for another scheme; None when it does not parse."""
    url = url.strip()
    if not _SCHEME.match(url):
        return None
    try:
        parts = urlsplit(url)
        hostname = parts.hostname
        parts.port  # noqa: B018 - raises on a port that is not a number or out of range
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        return ""
    if not hostname:
        return None
    if parts.netloc.rsplit("@", 1)[-1].startswith("["):
        try:
            ipaddress.IPv6Address(hostname.split("%", 1)[0])
        except ValueError:
            return None
        return hostname
    if _FORBIDDEN_HOST.search(hostname):
        return None
    # A trailing dot names the same host ("localhost." is localhost).
    host = hostname.rstrip(".")
    labels = host.split(".")
    if _number(labels[-1]) is None:
        return host
    # A numeric last label makes the host an IPv4 address, or an invalid URL.
    return _whatwg_ipv4(labels)


def _whatwg_ipv4(labels: list[str]) -> str | None:
    """The URL standard's IPv4 reading: up to four parts, each decimal, 0x-hex or 0-octal, the last one
    filling the remaining bytes. None when the parts do not make an address."""
    if len(labels) > 4:
        return None
    numbers = [_number(label) for label in labels]
    if any(n is None for n in numbers):
        return None
    values: list[int] = [n for n in numbers if n is not None]
    last = values.pop()
    if any(v > 255 for v in values) or last >= 256 ** (4 - len(values)):
        return None
    total = last
    for i, v in enumerate(values):
        total += v << (8 * (3 - i))
    return str(ipaddress.IPv4Address(total))


def _number(label: str) -> int | None:
    if not label:
        return None
    try:
        if label[:2] in ("0x", "0X"):
            return int(label[2:] or "0", 16)
        if len(label) > 1 and label[0] == "0":
            return int(label[1:], 8)
        return int(label, 10) if label.isdigit() else None
    except ValueError:
        return None


def _ip(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return None


def _ipv4_error(address: ipaddress.IPv4Address, embedded: bool = False) -> str | None:
    first, second = address.packed[0], address.packed[1]
    if first == 10 or (first == 172 and 16 <= second <= 31) or (first == 192 and second == 168):
        return errors.WEBHOOK_URL_PRIVATE
    if first == 169 and second == 254:
        return errors.WEBHOOK_URL_LINK_LOCAL
    if first == 0:
        return errors.WEBHOOK_URL_UNSPECIFIED
    if first == 127:
        # The reference names 127.0.0.1 itself localhost, other loopback addresses (and embedded ones) loopback.
        plain = not embedded and str(address) == "127.0.0.1"
        return errors.WEBHOOK_URL_LOCALHOST if plain else errors.WEBHOOK_URL_LOOPBACK
    return None


def _ipv6_error(address: ipaddress.IPv6Address) -> str | None:
    if address.is_unspecified:
        return errors.WEBHOOK_URL_UNSPECIFIED
    if address.is_loopback:
        return errors.WEBHOOK_URL_LOCALHOST
    embedded = address.ipv4_mapped
    if embedded is None and int(address) < 2**32:
        # The deprecated IPv4-compatible form (::a.b.c.d) embeds an IPv4 address too.
        embedded = ipaddress.IPv4Address(int(address))
    if embedded is not None:
        return _ipv4_error(embedded, embedded=True)
    if address in _ULA:
        return errors.WEBHOOK_URL_PRIVATE_ULA
    if address in _LINK_LOCAL:
        return errors.WEBHOOK_URL_LINK_LOCAL
    return None


_ULA = ipaddress.IPv6Network("fc00::/7")
_LINK_LOCAL = ipaddress.IPv6Network("fe80::/10")

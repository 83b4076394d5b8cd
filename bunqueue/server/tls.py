"""The server's TLS context, built once at start from the PEM files named by --tls-cert/--tls-key.

A missing or unreadable file, or a key that does not match the certificate, stops the server at start
with a message that names the file, rather than at the first client's handshake.
"""
from __future__ import annotations

import ssl


class TlsConfigError(Exception):
    """The TLS files cannot be used; the message says which and why."""


def _check_readable(path: str) -> None:
    try:
        with open(path, "rb"):
            pass
    except FileNotFoundError:
        raise TlsConfigError(f"TLS file not found: {path}") from None
    except OSError as exc:
        raise TlsConfigError(f"TLS file not readable: {path} ({exc.strerror})") from None


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    # ssl's own errors do not say which file is missing: look first.
    _check_readable(cert_file)
    _check_readable(key_file)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        context.load_cert_chain(cert_file, key_file)
    except ssl.SSLError as exc:
        reason = exc.reason or str(exc)
        raise TlsConfigError(f"TLS certificate {cert_file} and key {key_file} cannot be used: {reason}") from None
    return context

"""A self-signed certificate for loopback, made with the ``openssl`` command, for TLS servers in tests."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

OPENSSL = shutil.which("openssl")


def self_signed_cert(folder: Path) -> tuple[Path, Path]:
    """``(cert, key)`` PEM files in ``folder``, valid for a day for 127.0.0.1 and localhost."""
    if OPENSSL is None:
        raise RuntimeError("the openssl command is needed to make a test certificate")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run([OPENSSL, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
                    "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key

"""A self-signed TLS certificate for 127.0.0.1, made by the openssl CLI (Debian's openssl package)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path


def self_signed(where: Path, cert: str = "server.crt", key: str = "server.key") -> tuple[Path, Path]:
    """Write an EC P-256 certificate and key valid two days for IP 127.0.0.1; returns their paths."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise RuntimeError("the openssl CLI is missing (Debian package openssl)")
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(where / key), "-out", str(where / cert), "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    return where / cert, where / key

"""The exporter's TLS and basic auth, from a Prometheus exporter-toolkit web config file (the YAML every
official exporter and Prometheus itself read with --web.config.file):

    tls_server_config: {cert_file: server.crt, key_file: server.key}
    basic_auth_users: {prometheus: $2y$10$...}    # bcrypt hashes (htpasswd -nBC 10 "" | tr -d ':')

prometheus_client serves TLS but has no basic auth, so /metrics is its WSGI app behind a small auth
wrapper: bcrypt verification (the optional `bcrypt` package), the same work for an unknown user as for a
wrong password, and good credentials remembered by their SHA-256 so a scrape does not pay bcrypt each time.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket
import ssl
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from wsgiref.simple_server import WSGIServer

from gpuwise.errors import GpuwiseError
from gpuwise.exporter.http_server import PooledServer, Wsgi, routes

# The keys of exporter-toolkit's tls_server_config gpuwise honours; the others are refused, not ignored.
_TLS_KEYS = {"cert_file", "key_file"}
_TOP_KEYS = {"tls_server_config", "basic_auth_users"}
_REALM = 'Basic realm="gpuwise exporter"'


@dataclass(frozen=True)
class WebConfig:
    """The web config file's settings: TLS certificate and key paths (None: plain HTTP) and basic-auth users
    with their bcrypt hashes (empty: no auth).
    """

    cert_file: Path | None = None
    key_file: Path | None = None
    users: dict[str, bytes] = field(default_factory=dict)  # user -> bcrypt hash

    @property
    def tls(self) -> bool:
        """True when a certificate is configured, so the endpoint serves HTTPS."""
        return self.cert_file is not None


def load(path: str | Path) -> WebConfig:
    """Read and check a web config file; relative file names are relative to it (as exporter-toolkit)."""
    import yaml

    where = Path(path)
    try:
        data = yaml.safe_load(where.read_text(encoding="utf-8")) or {}
    except UnicodeDecodeError:
        raise GpuwiseError(f"--web-config {where}: not a text file (expected UTF-8 YAML)") from None
    except OSError as err:
        raise GpuwiseError(f"--web-config {where}: {err.strerror or err}") from None
    except yaml.YAMLError as err:
        raise GpuwiseError(f"--web-config {where}: not YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(data, dict):
        raise GpuwiseError(
            f"--web-config {where}: expected a mapping with tls_server_config, basic_auth_users"
        )
    _known(where, "", data, _TOP_KEYS)
    tls = data.get("tls_server_config") or {}
    _known(where, "tls_server_config.", tls, _TLS_KEYS)
    cert, key = (_file(where, tls, k) for k in ("cert_file", "key_file"))
    if (cert is None) != (key is None):
        raise GpuwiseError(f"--web-config {where}: tls_server_config needs both cert_file and key_file")
    users = data.get("basic_auth_users") or {}
    if not isinstance(users, dict):
        raise GpuwiseError(f"--web-config {where}: basic_auth_users must map user names to bcrypt hashes")
    hashes = {}
    for user, hashed in users.items():
        if not isinstance(hashed, str) or not hashed.startswith(("$2a$", "$2b$", "$2y$")):
            raise GpuwiseError(
                f"--web-config {where}: the password of {user!r} is not a bcrypt hash ($2y$...)"
            )
        hashes[str(user)] = hashed.encode()
    if hashes:
        _bcrypt()  # say now, not at the first scrape, that it is missing
    config = WebConfig(cert, key, hashes)
    if config.tls:
        _ssl_context(config)  # a key that does not match the certificate fails here, in one line
    return config


def _known(where: Path, prefix: str, block: Any, keys: set[str]) -> None:
    if not isinstance(block, dict):
        raise GpuwiseError(f"--web-config {where}: {prefix.rstrip('.')} must be a mapping")
    for key in block:
        if key not in keys:
            raise GpuwiseError(
                f"--web-config {where}: {prefix}{key} is not supported by gpuwise exporter "
                f"(supported: {', '.join(sorted(prefix + k for k in keys))})"
            )


def _file(where: Path, block: dict, key: str) -> Path | None:
    if not block.get(key):
        return None
    found = (where.parent / str(block[key])).resolve()
    if not found.is_file():
        raise GpuwiseError(f"--web-config {where}: tls_server_config.{key} {found} does not exist")
    return found


def _bcrypt() -> Any:
    try:
        import bcrypt
    except ImportError:
        raise GpuwiseError("basic_auth_users needs bcrypt: pip install 'gpuwise[monitor-auth]'") from None
    return bcrypt


def _ssl_context(config: WebConfig) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2  # exporter-toolkit's default min_version
    try:
        context.load_cert_chain(str(config.cert_file), str(config.key_file))
    except (ssl.SSLError, OSError) as err:
        raise GpuwiseError(
            f"--web-config: cannot use {config.cert_file} with {config.key_file}: {err}"
        ) from None
    return context


def exposure_warning(host: str, loopback: bool, config: WebConfig) -> str | None:
    """The warning for serving beyond this machine without TLS or without basic auth, else None."""
    if loopback or (config.tls and config.users):
        return None
    missing = " and ".join(
        x for x, have in (("TLS", config.tls), ("basic auth", bool(config.users))) if not have
    )
    return f"serving on {host} without {missing}, reachable from other machines (see --web-config)"


def basic_auth(app: Wsgi, users: dict[str, bytes]) -> Wsgi:
    """``app`` behind HTTP basic auth checked against bcrypt hashes."""
    bcrypt = _bcrypt()
    # an unknown user is checked against a hash of the same cost, so timing does not tell users apart
    cost = max((int(h[4:6]) for h in users.values() if h[4:6].isdigit()), default=10)
    dummy = bcrypt.hashpw(b"never a password", bcrypt.gensalt(rounds=min(max(cost, 4), 31)))
    good: set[bytes] = set()
    lock = threading.Lock()

    def allowed(header: str) -> bool:
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, sep, password = base64.b64decode(encoded, validate=True).decode().partition(":")
        except ValueError:
            return False
        if not sep:
            return False
        digest = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        with lock:
            if any(hmac.compare_digest(digest, seen) for seen in good):
                return True
        hashed = users.get(user)
        ok = bcrypt.checkpw(password.encode(), hashed if hashed is not None else dummy)
        if ok and hashed is not None:
            with lock:
                good.add(digest)
            return True
        return False

    def guarded(environ: dict, start_response: Callable) -> Iterable[bytes]:
        if allowed(environ.get("HTTP_AUTHORIZATION", "")):
            return app(environ, start_response)
        start_response(
            "401 Unauthorized", [("WWW-Authenticate", _REALM), ("Content-Type", "text/plain; charset=utf-8")]
        )
        return [b"Unauthorized\n"]

    return guarded


def serve(app: Wsgi, host: str, port: int, config: WebConfig, **limits: float) -> WSGIServer:
    """Serve ``app`` at /metrics on a daemon thread, with the config's TLS and basic auth, a bounded worker
    pool and per-connection timeouts (``limits``: http_server.PooledServer's keywords); ``shutdown()`` then
    ``server_close()`` stop it."""
    app = routes(app)
    if config.users:
        app = basic_auth(app, config.users)
    family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    server_class = type("_Bound", (PooledServer,), {"address_family": family})
    server: WSGIServer = server_class((host, port), **limits)
    server.set_app(app)
    if config.tls:
        # the handshake happens in a worker, under its timeouts: a slow or plain-HTTP client holds up no one
        server.socket = _ssl_context(config).wrap_socket(
            server.socket, server_side=True, do_handshake_on_connect=False
        )
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


__all__ = ["WebConfig", "basic_auth", "exposure_warning", "load", "serve"]

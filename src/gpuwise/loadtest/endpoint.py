"""Which URL to POST to, and a bounded reachability check that also finds the served model's name."""

from __future__ import annotations

import base64
import re
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

from gpuwise.errors import GpuwiseError
from gpuwise.loadtest.types import Endpoint

CONNECT_ATTEMPTS = 3  # tries before "cannot reach" (a server still starting gets ~1.5 s)
_BACKOFF_S = 0.5
_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/@\s]*@")


def redact(text: str) -> str:
    """``text`` with the user:password of every URL in it replaced by ``***`` (for messages and output)."""
    return _USERINFO.sub(r"\1***@", text)


@dataclass
class Target:
    """The server's OpenAI-compatible base URL (ending in ``/v1``) and which endpoint the test calls."""

    base_url: str  # ends in /v1, never with user:password (those move to ``headers``)
    endpoint: Endpoint
    headers: dict[str, str] = field(default_factory=dict, repr=False)  # Basic auth from the URL

    @property
    def url(self) -> str:
        """The URL requests are POSTed to: ``…/v1/chat/completions`` or ``…/v1/completions``."""
        return f"{self.base_url}/{'chat/completions' if self.endpoint == 'chat' else 'completions'}"


def parse_target(url: str, endpoint: Endpoint | None) -> Target:
    """'http://host:8000', '.../v1' or '.../v1/chat/completions' -> base URL and endpoint."""
    parts = urlsplit(url.strip())
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise GpuwiseError(
            f"bad URL {redact(url)!r}: give http(s)://HOST[:PORT][/v1], e.g. http://127.0.0.1:8000"
        )
    try:
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise GpuwiseError(f"bad URL {redact(url)!r}: the port is not a number from 0 to 65535") from None
    path = parts.path.rstrip("/")
    found: Endpoint | None = None
    for suffix, kind in (("/chat/completions", "chat"), ("/completions", "completions")):
        if path.endswith(suffix):
            path, found = path[: -len(suffix)], kind  # type: ignore[assignment]  # kind is an Endpoint
            break
    if not path.endswith("/v1"):
        path += "/v1"
    if endpoint and found and endpoint != found:
        raise GpuwiseError(f"the URL names the {found} endpoint but --endpoint is {endpoint}: drop one")
    headers = {}
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    host = parts.netloc.rpartition("@")[2]
    return Target(f"{parts.scheme}://{host}{path}", endpoint or found or "completions", headers)


def resolve_model(
    target: Target, model: str | None, headers: dict[str, str], timeout_s: float, verify: Any = True
) -> str:
    """GET /v1/models (bounded retries): proves the server answers, and names the model if not given.
    A TLS failure (unknown CA, wrong host name) is said as such at once, with the options that fix it."""
    import httpx

    from gpuwise.loadtest.client import tls_failure

    last = ""
    for attempt in range(CONNECT_ATTEMPTS):
        try:
            reply = httpx.get(
                f"{target.base_url}/models", headers=headers, timeout=min(timeout_s, 10.0), verify=verify
            )
        except httpx.ConnectError as err:
            if (reason := tls_failure(err)) is not None:
                raise GpuwiseError(
                    f"TLS failed for {target.base_url} ({redact(reason)[:200]}): give the server's CA with "
                    "--ca-cert FILE, or --insecure to skip verification"
                ) from None
            last = "connect error"
            time.sleep(_BACKOFF_S * (attempt + 1))
            continue
        except httpx.TimeoutException as err:
            last = type(err).__name__.replace("Error", " error").replace("Exception", "").lower().strip()
            time.sleep(_BACKOFF_S * (attempt + 1))
            continue
        if model:
            return model
        if reply.status_code == 401 or reply.status_code == 403:
            raise GpuwiseError(
                f"{target.base_url} refused the API key (HTTP {reply.status_code}): set OPENAI_API_KEY "
                "or name the variable with --api-key-env"
            )
        try:
            models = [m["id"] for m in reply.json().get("data", [])]
        except (ValueError, AttributeError, KeyError, TypeError):
            models = []
        if not models:
            raise GpuwiseError(f"{target.base_url}/models lists no model: give --model NAME")
        return str(models[0])
    raise GpuwiseError(
        f"cannot reach {target.base_url} ({last}, {CONNECT_ATTEMPTS} attempts): is the server running?"
    )


__all__ = ["Target", "parse_target", "redact", "resolve_model"]

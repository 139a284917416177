"""A bounded client for Prometheus' HTTP API (stdlib urllib, so the monitor extra stays light).

Every failure is one GpuwiseError line that names the server (credentials removed) and what went wrong:
unreachable, refused credentials, an HTTP error, an answer that is not Prometheus', or Prometheus' own
error. Credentials come from the environment (never from the command line, never printed):
GPUWISE_PROMETHEUS_TOKEN (bearer) or GPUWISE_PROMETHEUS_USER + GPUWISE_PROMETHEUS_PASSWORD (basic).
"""

from __future__ import annotations

import base64
import math
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from typing import Any

import orjson

from gpuwise.errors import GpuwiseError

# Prometheus refuses a range query of more than 11,000 points per series (web/api/v1/api.go).
MAX_POINTS_PER_SERIES = 11_000
# Points (series × steps) asked for in one response: bounds the JSON Prometheus builds and we parse.
MAX_POINTS_PER_QUERY = 1_000_000
DEFAULT_TIMEOUT_S = 30.0
TOKEN_ENV = "GPUWISE_PROMETHEUS_TOKEN"
USER_ENV, PASSWORD_ENV = "GPUWISE_PROMETHEUS_USER", "GPUWISE_PROMETHEUS_PASSWORD"


def redact(url: str) -> str:
    """The URL without user:password@ (what every message shows)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


def _auth_header(url: str) -> str | None:
    token = os.environ.get(TOKEN_ENV)
    if token:
        return f"Bearer {token}"
    parts = urllib.parse.urlsplit(url)
    user = os.environ.get(USER_ENV) or urllib.parse.unquote(parts.username or "")
    password = os.environ.get(PASSWORD_ENV) or urllib.parse.unquote(parts.password or "")
    if not user:
        return None
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


class PrometheusApi:
    """GET /api/v1/... of one server; ``data`` of a successful answer, else one GpuwiseError line."""

    def __init__(self, url: str, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise GpuwiseError(f"Prometheus URL {url!r}: expected http(s)://HOST:PORT, e.g. http://prom:9090")
        self.shown = redact(url)
        self.base = self.shown + "/api/v1/"
        self.timeout_s = timeout_s
        self._auth = _auth_header(url)

    def get(self, path: str, params: list[tuple[str, str]]) -> Any:
        """GET ``/api/v1/{path}`` with ``params`` and return the answer's ``data``.

        Raises one ``GpuwiseError`` line for an unreachable server, refused credentials, an HTTP error, a
        timeout (``timeout_s``), an answer that is not a Prometheus API's, or Prometheus' own error.
        """
        url = self.base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        request = urllib.request.Request(url, headers={"Accept": "application/json"})
        if self._auth:
            request.add_header("Authorization", self._auth)
        where = f"Prometheus at {self.shown}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = response.read()
        except urllib.error.HTTPError as err:
            body = err.read()
            if err.code in (401, 403):
                raise GpuwiseError(
                    f"{where} refused the credentials (HTTP {err.code}); set {TOKEN_ENV}, "
                    f"or {USER_ENV} and {PASSWORD_ENV}"
                ) from None
            if not _prometheus_error(body):
                raise GpuwiseError(f"{where}: HTTP {err.code} {err.reason} on /api/v1/{path}") from None
        except urllib.error.URLError as err:
            reason = getattr(err.reason, "strerror", None) or str(err.reason)
            raise GpuwiseError(f"cannot reach {where}: {reason}") from None
        except TimeoutError:
            raise GpuwiseError(f"{where} did not answer within {self.timeout_s:g} s") from None
        except OSError as err:
            raise GpuwiseError(f"cannot reach {where}: {err.strerror or err}") from None
        answer = _json(body)
        if not isinstance(answer, dict) or answer.get("status") not in ("success", "error"):
            raise GpuwiseError(f"{where}: /api/v1/{path} did not answer as a Prometheus API does")
        if answer["status"] == "error":
            raise GpuwiseError(f"{where}: {answer.get('errorType', 'error')}: {answer.get('error', '')}")
        return answer.get("data")

    def metric_names(self, start_unix_s: float, end_unix_s: float) -> set[str]:
        """Every metric name with samples between the two Unix times (s): what tells the exporter dialect."""
        names = self.get("label/__name__/values", [("start", _ts(start_unix_s)), ("end", _ts(end_unix_s))])
        if not isinstance(names, list):
            raise GpuwiseError(f"Prometheus at {self.shown}: metric names are not a list")
        return set(names)

    def query_range(
        self, expr: str, start_unix_s: float, end_unix_s: float, step_s: float, series: int = 1
    ) -> Iterator[dict]:
        """The matrix of ``expr``, asked in chunks of at most 11,000 steps and ~1 M points each."""
        for lo, hi in chunks(start_unix_s, end_unix_s, step_s, series):
            params = [
                ("query", expr),
                ("start", _ts(lo)),
                ("end", _ts(hi)),
                ("step", f"{step_s:g}"),
                ("timeout", f"{self.timeout_s:g}s"),
            ]
            data = self.get("query_range", params)
            if not isinstance(data, dict) or data.get("resultType") != "matrix":
                raise GpuwiseError(f"Prometheus at {self.shown}: query_range did not return a matrix")
            yield from data.get("result") or []


def chunks(start_unix_s: float, end_unix_s: float, step_s: float, series: int) -> list[tuple[float, float]]:
    """[start, end] cut at whole steps so no chunk exceeds the per-series or per-query points."""
    per_chunk = max(1, min(MAX_POINTS_PER_SERIES, MAX_POINTS_PER_QUERY // max(1, series)))
    total = math.floor((end_unix_s - start_unix_s) / step_s + 1e-9) + 1
    out = []
    for first in range(0, total, per_chunk):
        last = min(total, first + per_chunk) - 1
        out.append((start_unix_s + first * step_s, start_unix_s + last * step_s))
    return out


def _ts(unix_s: float) -> str:
    return f"{unix_s:.3f}"


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _prometheus_error(body: bytes) -> dict | None:
    answer = _json(body)
    return answer if isinstance(answer, dict) and answer.get("status") == "error" else None


__all__ = ["DEFAULT_TIMEOUT_S", "PrometheusApi", "chunks", "redact"]

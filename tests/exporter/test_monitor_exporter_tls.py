"""`gpuwise exporter --web-config`: real HTTPS with a self-signed certificate made here by the openssl CLI,
basic auth against bcrypt hashes, the scrape parsed with prometheus_client's parser; then a real Prometheus
scraping it over TLS with credentials, itself served behind the same kind of web config, read back by
`load_history` with credentials from the environment."""

from __future__ import annotations

import base64
import json
import shutil
import ssl
import time
import urllib.error
import urllib.request
from functools import partial
from pathlib import Path

import bcrypt
import pytest
from prometheus_client.parser import text_string_to_metric_families

from fake_nvml import fake_nvml
from gpuwise.errors import GpuwiseError
from gpuwise.exporter import scrape as exporter
from gpuwise.exporter import web_config
from gpuwise.finops.prometheus_source import load_history
from gpuwise.monitor.sampler import GpuSampler
from prometheus_server import prometheus, wait_for_samples
from self_signed import self_signed

PASSWORD = "scrape-me"


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    """A self-signed certificate for 127.0.0.1 (server.crt, server.key)."""
    tmp = tmp_path_factory.mktemp("certs")
    self_signed(tmp)
    return tmp


def write_config(where: Path, tls: bool = True, users: bool = True) -> Path:
    data: dict = {}
    if tls:
        data["tls_server_config"] = {"cert_file": "server.crt", "key_file": "server.key"}
    if users:
        hashed = bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)).decode()
        hashed = "$2y$" + hashed[4:]  # the prefix htpasswd -B writes
        data["basic_auth_users"] = {"prometheus": hashed}
    path = where / "web.yml"
    path.write_text(json.dumps(data))  # JSON is YAML
    return path


def opener(certs: Path, user: str | None = None, password: str | None = None):
    context = ssl.create_default_context(cafile=str(certs / "server.crt"))

    def urlopen(url: str, timeout: float = 10):
        request = urllib.request.Request(url)
        if user is not None:
            token = base64.b64encode(f"{user}:{password}".encode()).decode()
            request.add_header("Authorization", f"Basic {token}")
        return urllib.request.urlopen(request, timeout=timeout, context=context)

    return urlopen


def status(urlopen, url: str) -> int:
    try:
        with urlopen(url) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def test_https_with_basic_auth_401_then_200_and_a_parsable_scrape(certs):
    config = web_config.load(write_config(certs))
    with fake_nvml("healthy_and_idle"):
        sampler = GpuSampler()
        server = exporter.start(sampler, "127.0.0.1:0", config=config)
        try:
            url = f"https://127.0.0.1:{server.server_port}/metrics"
            assert status(opener(certs), url) == 401
            assert status(opener(certs, "prometheus", "wrong"), url) == 401
            assert status(opener(certs, "nobody", PASSWORD), url) == 401
            with opener(certs, "prometheus", PASSWORD)(url) as response:
                assert response.status == 200
                text = response.read().decode()
            # plain HTTP to the TLS port gets no metrics
            with pytest.raises((urllib.error.URLError, ConnectionError)):
                urllib.request.urlopen(url.replace("https", "http"), timeout=5).read()
        finally:
            server.shutdown()
            server.server_close()
            sampler.close()
    busy = {
        s.labels["gpu"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "gpuwise_gpu_busy_ratio"
    }
    assert busy == {"0": pytest.approx(0.97), "1": 0.0}


def test_prometheus_scrapes_the_tls_exporter_and_load_history_logs_in(certs, tmp_path, monkeypatch):
    """Prometheus (scheme https, ca_file, basic_auth) scrapes the exporter; Prometheus itself is behind the
    same web config; load_history reads it with GPUWISE_PROMETHEUS_USER/PASSWORD and SSL_CERT_FILE."""
    shutil.copy(certs / "server.crt", tmp_path)
    shutil.copy(certs / "server.key", tmp_path)
    config_file = write_config(tmp_path)
    urlopen = opener(certs, "prometheus", PASSWORD)
    with fake_nvml("throttled"):
        sampler = GpuSampler()
        server = exporter.start(sampler, "127.0.0.1:0", config=web_config.load(config_file))
        try:
            job = {
                "job_name": "tls",
                "scheme": "https",
                "tls_config": {"ca_file": str(certs / "server.crt")},
                "basic_auth": {"username": "prometheus", "password": PASSWORD},
                "static_configs": [{"targets": [f"127.0.0.1:{server.server_port}"]}],
            }
            with prometheus([], tmp_path, jobs=(job,), web_config=config_file, urlopen=urlopen) as url:
                assert url.startswith("https://")
                wait_for_samples(url, "gpuwise_gpu_busy_ratio", 1, 3, urlopen=urlopen)
                end = time.time()
                monkeypatch.setenv("SSL_CERT_FILE", str(certs / "server.crt"))
                with pytest.raises(GpuwiseError, match="refused the credentials"):
                    load_history(url, end - 60, end, 1.0)
                monkeypatch.setenv("GPUWISE_PROMETHEUS_USER", "prometheus")
                monkeypatch.setenv("GPUWISE_PROMETHEUS_PASSWORD", PASSWORD)
                history = load_history(url, end - 60, end, 1.0)
        finally:
            server.shutdown()
            server.server_close()
            sampler.close()
    (gpu,) = history.gpus
    assert gpu.uuid == "GPU-2c" and all(s.busy_pct == pytest.approx(99) for s in gpu.samples)
    assert "sw_power_cap" in gpu.samples[-1].throttle_s


@pytest.mark.parametrize(
    "content, message",
    [
        ("tls_server_config: {cert_file: server.crt}", "needs both cert_file and key_file"),
        ("tls_server_config: {cert_file: missing.crt, key_file: server.key}", "missing.crt does not exist"),
        ("tls_server_config: {cert_file: server.crt, key_file: server.key, client_ca_file: ca.crt}",
         "tls_server_config.client_ca_file is not supported"),
        ("http_server_config: {http2: true}", "http_server_config is not supported"),
        ("basic_auth_users: {prometheus: plaintext}", "'prometheus' is not a bcrypt hash"),
        ("basic_auth_users: [prometheus]", "must map user names to bcrypt hashes"),
        ("tls_server_config: [", "not YAML"),
        ("tls_server_config: {cert_file: server.key, key_file: server.crt}", "cannot use"),
    ],
)  # fmt: skip
def test_a_bad_web_config_is_one_clear_line(certs, tmp_path, content, message):
    shutil.copy(certs / "server.crt", tmp_path)
    shutil.copy(certs / "server.key", tmp_path)
    (tmp_path / "web.yml").write_text(content)
    with pytest.raises(GpuwiseError, match=message) as e:
        web_config.load(tmp_path / "web.yml")
    assert "\n" not in str(e.value)
    with pytest.raises(GpuwiseError, match="No such file"):
        web_config.load(tmp_path / "absent.yml")


def test_serving_beyond_loopback_without_tls_or_auth_is_warned(certs):
    warn = partial(web_config.exposure_warning, "0.0.0.0", False)
    assert warn(web_config.WebConfig()) == (
        "serving on 0.0.0.0 without TLS and basic auth, reachable from other machines (see --web-config)"
    )
    assert "without basic auth" in (warn(web_config.load(write_config(certs, users=False))) or "")
    assert "without TLS," in (warn(web_config.load(write_config(certs, tls=False))) or "")
    assert warn(web_config.load(write_config(certs))) is None
    assert web_config.exposure_warning("127.0.0.1", True, web_config.WebConfig()) is None


def test_the_cli_refuses_a_bad_web_config_before_touching_nvml(cli, tmp_path):
    (tmp_path / "web.yml").write_text("basic_auth_users: {prometheus: plaintext}")
    result = cli("exporter", "--web-config", str(tmp_path / "web.yml"))
    assert result.exit_code == 2
    assert "is not a bcrypt hash" in result.stderr and "Traceback" not in result.stderr


def test_the_cli_serves_https_with_basic_auth_until_ctrl_c(certs, capfd, monkeypatch):
    """`gpuwise exporter --web-config` in-process on faked NVML; its wait is interrupted after one scrape."""
    from gpuwise.cli.app import main
    from prometheus_server import free_port

    port = free_port()
    scraped: list[int] = []

    def sleep_then_ctrl_c(_seconds: float) -> None:
        url = f"https://127.0.0.1:{port}/metrics"
        scraped.append(status(opener(certs), url))
        scraped.append(status(opener(certs, "prometheus", PASSWORD), url))
        raise KeyboardInterrupt

    monkeypatch.setattr(time, "sleep", sleep_then_ctrl_c)
    config = write_config(certs)
    with fake_nvml("healthy_and_idle"):
        try:
            main(["exporter", "--listen", f"127.0.0.1:{port}", "--web-config", str(config)])
        except SystemExit as done:
            assert not done.code
    err = capfd.readouterr().err
    assert scraped == [401, 200]
    assert f"serving https://127.0.0.1:{port}/metrics (basic auth) for 2 GPUs" in err
    assert "warning" not in err

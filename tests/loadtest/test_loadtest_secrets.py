"""Credentials never reach output or the store: URL user:password and the API key are sent to the server
(as Basic / Bearer headers) and found nowhere else: not in the table, the JSON, the SQLite run store,
`runs list`, `loadtest --show` or any error message (real CLI subprocesses, real HTTP on 127.0.0.1)."""

from __future__ import annotations

import base64
import os

from loadtest_engines import EngineServer

PASSWORD, KEY = "pa55-w0rd-xyzzy", "sk-never-shown-4242"


def _clean(*texts: str) -> None:
    for text in texts:
        assert PASSWORD not in text and KEY not in text and "alice:" not in text, text[:400]


def test_credentials_are_sent_but_never_printed_or_stored(cli, tmp_path):
    store = tmp_path / "runs.db"
    env = {**os.environ, "MY_KEY": KEY}
    with EngineServer("vllm") as server:
        url = server.url.replace("http://", f"http://alice:{PASSWORD}@")
        common = ["--concurrency", "1", "--max-requests", "2", "--output-tokens", "3", "--store", str(store)]
        table = cli("loadtest", url, *common)
        as_json = cli("loadtest", url, *common, "--json")
        keyed = cli("loadtest", url, *common, "--api-key-env", "MY_KEY", "--json", env=env)
        sent = [h.get("authorization", "") for h in server.request_headers]
    assert table.exit_code == 0 and as_json.exit_code == 0 and keyed.exit_code == 0, table.stderr
    basic = "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()
    assert basic in sent and f"Bearer {KEY}" in sent  # the server got them
    assert as_json.json()["url"].startswith("http://127.0.0.1:")
    listed = cli("runs", "list", "--store", str(store))
    listed_json = cli("runs", "list", "--store", str(store), "--json")
    shown = cli("loadtest", "--show", "last", "--store", str(store), "--json")
    assert listed.exit_code == 0 and "loadtest http://127.0.0.1" in listed_json.stdout
    raw = store.read_bytes().decode("latin-1")
    _clean(raw, *(o.stdout + o.stderr for o in (table, as_json, keyed, listed, listed_json, shown)))
    assert basic.split()[1] not in raw + as_json.stdout


def test_error_messages_redact_the_url(cli, tmp_path):
    env = {**os.environ, "MY_KEY": KEY}
    for url in (
        f"http://alice:{PASSWORD}@127.0.0.1:99999",  # a bad port
        f"ftp://alice:{PASSWORD}@127.0.0.1:9",  # a bad scheme
        f"http://alice:{PASSWORD}@127.0.0.1:9",  # nothing listening
    ):
        out = cli("loadtest", url, "--no-save", "--api-key-env", "MY_KEY", env=env)
        assert out.exit_code == 2 and out.stderr.startswith("gpuwise: error:"), out.stderr
        _clean(out.stdout, out.stderr)

"""The price catalog: every GPU priced (or its absence explained), every price sourced and dated."""

from __future__ import annotations

import csv
import datetime as dt
import json
import os
from importlib import resources

import pytest

from gpuwise.catalog import get_gpu, list_gpus
from gpuwise.catalog.prices import PRICE_KINDS, all_prices, no_price_reason, price, prices_for

# The GPUs the issue names: the seeds' inference GPUs must be rankable on cost.
NAMED = ("l4", "l40s", "t4", "a10g", "rtx-4090", "rtx-5090", "b200", "mi300x", "h100-sxm", "h200-sxm")


def _rows() -> list[dict[str, str]]:
    text = resources.files("gpuwise.catalog").joinpath("data/prices.csv").read_text(encoding="utf-8")
    return list(csv.DictReader(text.splitlines()))


def test_every_catalog_gpu_has_an_on_demand_price_or_a_documented_reason() -> None:
    missing = []
    for gpu in list_gpus():
        if gpu.origin != "catalog":
            continue
        listed = price(gpu.id, "on_demand")
        reason = no_price_reason(gpu.id)
        if listed is None and not (reason and len(reason) > 20):
            missing.append(gpu.id)
        assert not (listed and reason), f"{gpu.id} has both a price and a reason for having none"
    assert missing == []


def test_the_issue_gpus_have_on_demand_prices() -> None:
    for gpu_id in NAMED:
        listed = price(gpu_id, "on_demand")
        assert listed is not None, gpu_id
        assert 0.1 < listed.usd < 50, (gpu_id, listed.usd)


def test_gb200_absence_is_explained_and_its_rack_price_is_listed() -> None:
    assert price("gb200") is None
    assert "NVL72" in (no_price_reason("gb200") or "")
    rack = price("gb200", "purchase_server")
    assert rack is not None and rack.gpus == 72 and rack.usd_per_gpu == pytest.approx(rack.usd / 72)


def test_every_row_has_a_known_gpu_kind_unit_source_and_past_date() -> None:
    ids = {g.id for g in list_gpus()}
    today = dt.date(2026, 11, 28)  # the day the newest rows were read
    rows = _rows()
    assert len(rows) >= len(ids)
    for row in rows:
        assert row["gpu_id"] in ids, row
        assert row["kind"] in PRICE_KINDS, row
        assert row["source"].strip(), row
        assert dt.date.fromisoformat(row["as_of"]) <= today, row
        if row["usd"]:
            hourly = row["unit"] == "gpu_hour"
            assert hourly == (row["kind"] in ("on_demand", "spot", "reserved_1y", "reserved_3y")), row
            assert row["provider"].strip(), row


def test_discounts_are_below_on_demand_from_the_same_provider() -> None:
    """Spot and reserved rates undercut the same provider's on-demand rate (a data-entry check)."""
    checked = 0
    for p in all_prices():
        if p.kind in ("spot", "reserved_1y", "reserved_3y"):
            same = [o for o in prices_for(p.gpu_id) if o.kind == "on_demand" and o.provider == p.provider]
            for o in same:
                assert p.usd < o.usd, (p, o)
                checked += 1
    assert checked >= 8


def test_catalog_gpu_takes_its_default_hourly_price_from_prices_csv() -> None:
    gpu = get_gpu("l4")
    assert gpu.cloud_usd_per_hr == price("l4").usd  # type: ignore[union-attr]
    assert "as of 2026-08-26" in gpu.price_source
    assert "NVL72" in get_gpu("gb200").price_source


def test_gpus_cli_shows_price_kinds_and_as_of_date(cli) -> None:
    out = cli("gpus", env={**os.environ, "COLUMNS": "160"}).stdout
    assert "as of" in out and "2026-08-26" in out
    shown = json.loads(cli("gpus", "h100-sxm", "--json").stdout)
    kinds = {p["kind"] for p in shown["prices"]}
    assert {"on_demand", "spot", "purchase_server"} <= kinds
    assert all(p["source"] and p["as_of"] for p in shown["prices"])

"""`bundled_text` reads a package's data file as `importlib.resources` does, beside the package when it
is a directory, through `importlib.resources` when it is not (a zip import)."""

from __future__ import annotations

import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest

from gpuwise.catalog.bundled import bundled_text


@pytest.mark.parametrize(
    ("package", "relative"),
    [
        ("gpuwise.catalog", "data/gpus.csv"),
        ("gpuwise.catalog", "data/prices.csv"),
        ("gpuwise.trace", "data/kernel_taxonomy.csv"),
    ],
)
def test_same_text_as_importlib_resources(package: str, relative: str):
    expected = resources.files(package).joinpath(relative).read_text(encoding="utf-8")
    assert expected and bundled_text(package, relative) == expected


def test_a_zipped_package_is_read_through_importlib_resources(tmp_path: Path, monkeypatch):
    archive = tmp_path / "pkgs.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("zipped_data_pkg/__init__.py", "")
        zf.writestr("zipped_data_pkg/data/table.csv", "id,value\nx,1\n")
    monkeypatch.syspath_prepend(str(archive))
    try:
        assert bundled_text("zipped_data_pkg", "data/table.csv") == "id,value\nx,1\n"
    finally:
        sys.modules.pop("zipped_data_pkg", None)


def test_a_missing_file_raises():
    with pytest.raises(FileNotFoundError):
        bundled_text("gpuwise.catalog", "data/no-such-file.csv")

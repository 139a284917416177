"""Where users put their own catalog entries, so they never edit the package.

Search order (later wins on a duplicate id):
1. the package data (``catalog/data/*.csv``),
2. ``<user config dir>/gpuwise/{gpus,models}.{yaml,yml,toml}``,
3. files named in ``GPUWISE_GPUS`` / ``GPUWISE_MODELS`` (``os.pathsep``-separated).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from gpuwise.errors import GpuwiseError

__all__ = ["T", "catalog_files", "load_catalog", "load_structured", "read_entries", "user_config_dir"]


T = TypeVar("T")


def load_catalog(kind: str, build: Callable[..., T]) -> dict[str, T]:
    """Bundled ``data/{kind}.csv`` rows, then the user's files, keyed by id (later wins).

    ``build(mapping, origin=...)`` turns a row or user entry into a catalog object with an ``id``.
    """
    import csv
    import io

    from gpuwise.catalog.bundled import bundled_text

    text = bundled_text("gpuwise.catalog", f"data/{kind}.csv")
    entries: dict[str, T] = {}
    for row in csv.DictReader(io.StringIO(text)):
        item = build(row)
        entries[item.id] = item  # type: ignore[attr-defined]
    for path in catalog_files(kind):
        for entry in read_entries(path):
            item = build(entry, origin=str(path))
            entries[item.id] = item  # type: ignore[attr-defined]
    return entries


def user_config_dir() -> Path:
    """The per-user config folder (``platformdirs``; e.g. ``~/.config/gpuwise`` on Linux) where
    ``gpus.yaml`` / ``models.yaml`` are looked for."""
    from platformdirs import user_config_dir as _dir

    return Path(_dir("gpuwise"))


def catalog_files(kind: str) -> list[Path]:
    """User catalog files for ``kind`` ('gpus' or 'models') that exist, in load order."""
    base = user_config_dir()
    found = [base / f"{kind}.{ext}" for ext in ("yaml", "yml", "toml") if (base / f"{kind}.{ext}").is_file()]
    env = os.environ.get(f"GPUWISE_{kind.upper()}", "")
    for item in filter(None, env.split(os.pathsep)):
        path = Path(item).expanduser()
        if not path.is_file():
            raise GpuwiseError(f"GPUWISE_{kind.upper()} names {path}, which does not exist")
        found.append(path)
    return found


def read_entries(path: Path) -> list[dict[str, Any]]:
    """Read a user catalog file: a list of entries, or a mapping id -> entry."""
    data = load_structured(path)
    if isinstance(data, dict) and len(data) == 1 and isinstance(next(iter(data.values())), list):
        data = next(iter(data.values()))  # allow a top-level key such as `gpus:`
    if isinstance(data, dict):
        data = [{"id": key, **(value or {})} for key, value in data.items()]
    if not isinstance(data, list) or not all(isinstance(e, dict) for e in data):
        raise GpuwiseError(f"{path}: expected a list of entries or a mapping of id to entry")
    return data


def load_structured(path: Path) -> Any:
    """Parse YAML or TOML, reporting syntax errors with file and line."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise GpuwiseError(f"{path}: not a text file (expected UTF-8 YAML or TOML)") from None
    if path.suffix == ".toml":
        if sys.version_info >= (3, 11):  # imported here: most runs read no TOML file (start-up time)
            import tomllib
        else:  # pragma: no cover - Python 3.10
            import tomli as tomllib
        try:
            return tomllib.loads(text)
        except tomllib.TOMLDecodeError as err:
            raise GpuwiseError(f"{path}: invalid TOML: {err}") from None
    import yaml

    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise GpuwiseError(f"{path}:{where}: invalid YAML: {problem}") from None

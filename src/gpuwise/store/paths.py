"""Where the stores live and the one timestamp format their rows use.

Both files sit in one directory so a user who moves the run store (``GPUWISE_STORE`` or ``--store``)
moves the monitor history with it, unless ``GPUWISE_MONITOR_STORE`` names its own file.
"""

from __future__ import annotations

import datetime as _dt
import os
from pathlib import Path

__all__ = ["default_history_path", "default_store_path", "utc_stamp"]


def default_store_path() -> Path:
    """The run store's file: ``GPUWISE_STORE`` if set, else ``runs.sqlite`` in the user data directory
    (``platformdirs.user_data_dir("gpuwise")``)."""
    env = os.environ.get("GPUWISE_STORE")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("gpuwise")) / "runs.sqlite"


def default_history_path() -> Path:
    """``GPUWISE_MONITOR_STORE``, else ``monitor.sqlite`` in the run store's directory."""
    env = os.environ.get("GPUWISE_MONITOR_STORE")
    if env:
        return Path(env).expanduser()
    return default_store_path().parent / "monitor.sqlite"


def utc_stamp() -> str:
    """Now in UTC as ``YYYY-MM-DDTHH:MM:SSZ``: the ``created_at`` text of every run row (sorts as text)."""
    return _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")

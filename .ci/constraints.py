"""Print constraints.txt: every distribution of this environment at its version (`make constraints`).

torch and the CUDA libraries it pulls in are left out: TORCH_PIN and TORCH_INDEX choose the build, and a
CPU machine's file must not forbid a GPU machine's wheels. The pins carry a marker for the Python they were
tested on and newer; older Pythons resolve within pyproject.toml's ranges (make test-lowest checks the floor).
"""

from __future__ import annotations

import platform
import re
from importlib import metadata

LEFT_OUT = re.compile(r"^(torch|triton|gpuwise|pip|setuptools|wheel)$|^nvidia-(?!ml-py$)")


def main() -> None:
    major, minor, _ = platform.python_version_tuple()
    marker = f'python_version >= "{major}.{minor}"'
    pins = {}
    for dist in metadata.distributions():
        name = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
        if not LEFT_OUT.search(name):
            pins[name] = dist.version
    print(f"# Versions the test suite passed with, on Python {platform.python_version()} (make constraints).")
    print("# torch is chosen by the Makefile (TORCH_PIN, TORCH_INDEX).")
    for name in sorted(pins):
        print(f"{name}=={pins[name]}; {marker}")


if __name__ == "__main__":
    main()

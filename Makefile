# Entry points that work on a fresh machine (Python >= 3.10 with venv, and PyPI):
#   make demo        - create .venv, install gpuwise + torch, run the main job (gpuwise doctor)
#   make check       - the gates: ruff format --check, ruff check, mypy (versions pinned in the dev extra)
#   make test        - the system tools it needs checked first, make check, then the whole test suite
#                      (what CI runs: .ci/run, which installs those tools with apt-get)
#   make test-lowest - the test suite against the lowest supported versions (constraints-lowest.txt)
#   make bench       - every benchmark script
#
# Installs use constraints.txt: the versions the suite was last run with (regenerate: make constraints).
#
# torch: without an NVIDIA GPU (no working `nvidia-smi`) the CPU build comes from PyTorch's CPU index
# (about 200 MB instead of the several-GB CUDA build PyPI serves on Linux). Choose yourself with
#   make demo TORCH_INDEX=https://download.pytorch.org/whl/cu128   # a CUDA build from PyTorch's index
#   make demo TORCH_INDEX=                                          # whatever pip's own sources give
#   make demo TORCH_PIN='torch==2.12.*'                             # another torch release
# If TORCH_INDEX cannot be reached, pip's own sources are used and the build that came is printed.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
TORCH_PIN ?= torch==2.13.0
NVIDIA_GPU := $(shell nvidia-smi -L >/dev/null 2>&1 && echo yes)
TORCH_INDEX ?= $(if $(NVIDIA_GPU),,https://download.pytorch.org/whl/cpu)
CONSTRAINTS ?= constraints.txt
PYTEST_ARGS ?=
# the lowest-versions environment: another venv, the oldest supported Python if it is installed
LOWEST_PYTHON ?= $(shell command -v python3.10 || echo $(PYTHON))
LOWEST_VENV ?= .venv-lowest

.PHONY: demo check system-tools test test-lowest bench constraints clean

# $(call install_torch,VENV_PYTHON): the pinned torch, CPU build unless a GPU or TORCH_INDEX says otherwise
define install_torch
	@if [ -n "$(TORCH_INDEX)" ] && ! $(1) -c "import urllib.request as u; u.urlopen('$(TORCH_INDEX)/torch/', timeout=10)" 2>/dev/null; then \
		echo "note: $(TORCH_INDEX) cannot be reached; installing $(TORCH_PIN) from pip's configured sources"; \
		$(1) -m pip install --quiet --disable-pip-version-check '$(TORCH_PIN)'; \
	else \
		$(1) -m pip install --quiet --disable-pip-version-check $(if $(TORCH_INDEX),--extra-index-url $(TORCH_INDEX)) '$(TORCH_PIN)'; \
	fi
	@$(1) -W ignore -c "import torch; print('torch', torch.__version__, '(CUDA ' + torch.version.cuda + ')' if torch.version.cuda else '(CPU build)')"
endef

$(VENV)/.torch: Makefile
	$(PYTHON) -m venv $(VENV)
	$(call install_torch,$(PY))
	touch $@

# demo: the package with the profiling extra; test: every extra (report: charts) and the dev tools
$(VENV)/.demo: $(VENV)/.torch pyproject.toml $(CONSTRAINTS)
	$(PIP) install --quiet -c $(CONSTRAINTS) -e '.[profile]'
	touch $@

$(VENV)/.dev: $(VENV)/.torch pyproject.toml $(CONSTRAINTS)
	$(PIP) install --quiet -c $(CONSTRAINTS) -e '.[profile,monitor,sim,report,dev]'
	touch $@ $(VENV)/.demo

demo: $(VENV)/.demo
	$(VENV)/bin/gpuwise doctor

check: $(VENV)/.dev
	$(VENV)/bin/ruff format --check src tests benchmarks
	$(VENV)/bin/ruff check src tests benchmarks
	$(VENV)/bin/mypy

# Beyond Python and PyPI the suite needs Debian's chromium, prometheus (promtool) and openssl: said first,
# before anything is installed or run (tests/system_tools.py); `make test SYSTEM_TOOLS=warn` runs anyway.
SYSTEM_TOOLS ?= require
system-tools:
	@$(PYTHON) tests/system_tools.py || [ "$(SYSTEM_TOOLS)" = warn ] || \
		{ echo "make test stops here; install them, or run anyway with: make test SYSTEM_TOOLS=warn"; exit 1; }

# GPUWISE_STRICT_SKIPS: a skip fails the run unless it is for missing hardware (tests/conftest.py);
# --durations=30: the slowest tests, printed, to keep the suite within its 20 minutes on 2 cores
test: system-tools check
	GPUWISE_STRICT_SKIPS=1 $(PY) -m pytest -q -p no:cacheprovider --durations=30 $(PYTEST_ARGS)

$(LOWEST_VENV)/.dev: pyproject.toml constraints-lowest.txt Makefile
	$(LOWEST_PYTHON) -m venv $(LOWEST_VENV)
	$(call install_torch,$(LOWEST_VENV)/bin/python)
	$(LOWEST_VENV)/bin/python -m pip install --quiet --disable-pip-version-check \
		-c constraints-lowest.txt -e '.[profile,monitor,sim,report,dev]'
	touch $@

test-lowest: system-tools $(LOWEST_VENV)/.dev
	$(LOWEST_VENV)/bin/python -m pip list --disable-pip-version-check 2>/dev/null \
		| grep -iE '^(typer|click|rich|pyyaml|numpy|orjson|msgspec|psutil|platformdirs|transformers|peft|accelerate|torch) '
	GPUWISE_STRICT_SKIPS=1 $(LOWEST_VENV)/bin/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)

bench: $(VENV)/.dev
	for script in benchmarks/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

# the tested versions, from the dev environment (torch excluded: TORCH_PIN and TORCH_INDEX choose its build)
constraints: $(VENV)/.dev
	$(PY) .ci/constraints.py > constraints.txt

clean:
	rm -rf $(VENV) $(LOWEST_VENV) build dist src/*.egg-info .mypy_cache .ruff_cache

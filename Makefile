# Two entry points that work on a fresh machine (Python >= 3.10 with venv):
#   make demo  - create .venv, install gpuwise, run the main job (gpuwise doctor)
#   make test  - create .venv, install gpuwise with test extras, run the whole test suite
# torch is pinned to the CPU build that CI machines carry; users install whichever build they like.

PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
TORCH_PIN ?= torch==2.13.0

.PHONY: demo test bench clean

$(VENV)/.installed: pyproject.toml Makefile
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[profile,sim,dev]' '$(TORCH_PIN)'
	touch $@

demo: $(VENV)/.installed
	$(VENV)/bin/gpuwise doctor

test: $(VENV)/.installed
	$(PY) -m pytest -q -p no:cacheprovider

bench: $(VENV)/.installed
	for script in benchmarks/*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) build dist src/*.egg-info

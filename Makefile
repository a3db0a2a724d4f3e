# Two entry points (see README): `make run` and `make test`. Both create ./.venv, install the
# project into it, and install Debian's graphviz when `dot` is missing. `make docs` builds the
# documentation site (part of `make test`: a warning fails it).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
# One BLAS thread per process: Dask runs node kernels in parallel threads, and two BLAS
# threads per Dask thread on two cores made matvec-heavy graphs several times slower.
export OPENBLAS_NUM_THREADS ?= 1
export OMP_NUM_THREADS ?= 1
export MKL_NUM_THREADS ?= 1

.PHONY: run test docs bench lint system-deps browser-deps clean

system-deps:
	@command -v dot >/dev/null 2>&1 || { \
	  echo "installing Debian's graphviz (dot)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq graphviz >/dev/null; }

# The real-browser test of the dashboard's lanes page needs chromium + chromedriver; it
# skips with the reason where they are missing (no apt, or the install failed).
browser-deps:
	@command -v chromedriver >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium and chromium-driver (browser test)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver \
	    >/dev/null || echo "could not install chromium; the browser test will skip"; }

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -qq --upgrade pip

# The modules pccx_flow/compiled.py lists are built as C extensions by Cython when the
# project is installed; a later change to one of them or to the declarations beside it
# (`.pxd`) rebuilds them (`.compiled`), and until then that module runs from its source.
COMPILED_SOURCES := $(shell sed -n 's|^ *"\(pccx_flow\.[a-z_.]*\)",$$|\1|p' pccx_flow/compiled.py \
  | tr . / | sed 's|$$|.py|')
COMPILED_SOURCES += $(wildcard $(COMPILED_SOURCES:.py=.pxd))

$(VENV)/.run-installed: pyproject.toml setup.py | $(BIN)/python
	$(BIN)/pip install -qq -e '.[dashboard]'
	touch $@ $(VENV)/.compiled

$(VENV)/.compiled: setup.py pccx_flow/compiled.py $(COMPILED_SOURCES) | $(BIN)/python
	$(BIN)/pip install -qq --no-deps -e .
	touch $@

$(VENV)/.test-installed: pyproject.toml setup.py | $(BIN)/python
	$(BIN)/pip install -qq -e '.[dev]'
	$(BIN)/pip install -qq -e schedulers/
	touch $@ $(VENV)/.run-installed $(VENV)/.compiled

run: system-deps $(VENV)/.run-installed $(VENV)/.compiled
	$(BIN)/pccx-flow schedule --policy critical-path

docs: $(VENV)/.test-installed
	$(BIN)/mkdocs build --strict --quiet

# The suite starts ~100 pccx-flow processes and a pytest worker per core: with bytecode
# caching off in the environment (PYTHONDONTWRITEBYTECODE), each compiles pccx_flow again.
test: export PYTHONDONTWRITEBYTECODE =
test: system-deps browser-deps $(VENV)/.test-installed $(VENV)/.compiled
	$(BIN)/ruff check pccx_flow tests benchmarks schedulers dashboards setup.py
	$(BIN)/mkdocs build --strict --quiet
	$(BIN)/python -m pytest -q -n auto --dist worksteal

bench: system-deps $(VENV)/.test-installed
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis site build
	find pccx_flow \( -name '*.so' -o -name '*.c' \) -delete  # what Cython built (.gitignore)

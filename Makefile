# The kit's entry points. `make lab` runs the kit, `make test` runs every test; both install what
# they need into .venv first (a fresh machine needs only Python 3.11+ and make).
# `make lab` installs the student set only (the `student` extra: what the notebooks import);
# `make test` adds the development tools (`all`: pytest, nbval, mypy, playwright, ...).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STUDENT_STAMP := $(VENV)/.student-installed
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.bench-installed

.PHONY: lab test demo bench reliability floors handout clean replace-venv

# The Python that builds .venv must be 3.11 or newer, and it is checked before .venv is made: a
# first `make lab` with 3.9 used to leave a .venv that every later run reused and failed in. A .venv
# built by another Python (that one, or a version since replaced) is removed and built again, saying
# so. Versions are major.minor: PYTHON's own, and the one .venv/pyvenv.cfg records.
PYTHON_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
VENV_VERSION := $(shell sed -n 's/^version[_a-z]* *= *\([0-9]*\.[0-9]*\).*/\1/p' $(VENV)/pyvenv.cfg 2>/dev/null)
at_least_3_11 = $(shell echo '$(1)' | awk -F. '$$1 > 3 || ($$1 == 3 && $$2 >= 11) {print "yes"}')
PYTHON_OK := $(call at_least_3_11,$(PYTHON_VERSION))
# A .venv too old to use, or a usable PYTHON of another version than the .venv's (a PYTHON too old
# to build a new one keeps a good .venv: it is refused only if .venv must be built again).
REPLACE_VENV := $(if $(VENV_VERSION),$(if $(call at_least_3_11,$(VENV_VERSION)),$(and $(PYTHON_OK),$(filter-out \
    $(PYTHON_VERSION),$(VENV_VERSION))),yes))
GOAL := $(or $(firstword $(MAKECMDGOALS)),lab)
define check_python
	@test -n "$(PYTHON_OK)" || { echo "make: $(PYTHON) is $(if $(PYTHON_VERSION),Python $(PYTHON_VERSION),\
	not a Python that runs here); memkit needs Python 3.11 or newer: choose one, as in \
	make $(GOAL) PYTHON=python3.12"; exit 1; }
endef

replace-venv:
	$(check_python)
	@echo "make: $(VENV) was made by Python $(VENV_VERSION) and $(PYTHON) is Python $(PYTHON_VERSION): replacing $(VENV)"
	rm -rf $(VENV)

$(STUDENT_STAMP): pyproject.toml $(if $(REPLACE_VENV),replace-venv)
	$(check_python)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[student]'
	touch $(STUDENT_STAMP)

# One resolver pass for everything `make test` needs (`all` holds `student`, so the student stamp is
# true too); a second pass after the student set would resolve and build memkit twice.
$(STAMP): pyproject.toml $(if $(REPLACE_VENV),replace-venv)
	$(check_python)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[all]'
	touch $(STUDENT_STAMP) $(STAMP)

# Jupyter refuses to run as root without --allow-root (containers, CI machines); pass it only there.
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

# JupyterLab's defaults for this kit live in the repository (.jupyter/lab/settings/overrides.json:
# no "Jupyter news" pop-up, no update check); nothing is written to the user's home.
LAB_SETTINGS := --LabApp.app_settings_dir="$(CURDIR)/.jupyter/lab/settings"

lab: $(STUDENT_STAMP)
	$(BIN)/jupyter lab $(ROOT_FLAG) $(LAB_SETTINGS) notebooks/

# The browser test (tests/notebooks/test_browser.py) drives Debian's chromium; without one pytest skips it, and
# make says so before and after the run (-rfEs lists every failure, error and skip with its reason).
CHROMIUM := $(firstword $(wildcard /usr/bin/chromium) $(shell command -v chromium chromium-browser 2>/dev/null))
NO_BROWSER := *** make test: NO CHROMIUM FOUND, the browser test tests/notebooks/test_browser.py IS SKIPPED (apt-get install chromium) ***

# pytest runs on two workers (pytest-xdist, --dist loadgroup; `make test WORKERS=1` runs one), in
# units that one worker runs in order (tests/_workers.py, work_unit): each test file and each
# notebook, and one "serial" unit with the tests that kill, race or time processes and every test of
# the session's PostgreSQL servers; units start in collection order. mypy checks the package and
# notebooks/classroom meanwhile; its report follows pytest's, and either failing fails `make test`.
# The tests' temporary folders live in a short `mktemp -d` (removed afterwards): under pytest's
# usual base a worker's extra `popen-gwN/` made the demo's redis.sock path 110 bytes, over the 107 a
# Unix socket allows.
WORKERS ?= 2
XDIST := $(if $(filter-out 1,$(WORKERS)),-n $(WORKERS) --dist loadgroup --no-loadscope-reorder)

test: $(STAMP)
	@echo "$(if $(CHROMIUM),make test: the browser test runs with $(CHROMIUM),$(NO_BROWSER))"
	@mypy_out=$$(mktemp); base=$$(mktemp -d); trap 'rm -rf "$$mypy_out" "$$base"' EXIT; \
	echo "$(BIN)/ruff check memkit bench tests notebooks/classroom"; \
	$(BIN)/ruff check memkit bench tests notebooks/classroom; ruff_status=$$?; \
	$(BIN)/python -m mypy memkit notebooks/classroom >"$$mypy_out" 2>&1 & mypy_pid=$$!; \
	$(BIN)/python -m pytest -rfEs $(XDIST) --basetemp="$$base" tests notebooks --nbval \
	    --nbval-sanitize-with notebooks/sanitize.cfg; \
	status=$$?; wait $$mypy_pid; mypy_status=$$?; \
	echo "$(BIN)/python -m mypy memkit notebooks/classroom"; cat "$$mypy_out"; \
	$(if $(CHROMIUM),,echo "$(NO_BROWSER)";) \
	if [ $$status -eq 0 ]; then status=$$mypy_status; fi; \
	if [ $$status -eq 0 ]; then status=$$ruff_status; fi; exit $$status

demo: $(STUDENT_STAMP)
	$(BIN)/memkit demo

# The teacher's handouts under handout/ (git-ignored): handout/student holds every notebook without
# outputs and without the cells tagged `solution`, handout/teacher every notebook as it is; each
# beside a copy of notebooks/classroom, which the notebooks import (notebooks/classroom/handout.py).
handout: $(STUDENT_STAMP)
	$(BIN)/python notebooks/classroom/handout.py --out handout

# The benchmark also needs the peers it compares memkit with (the `bench` extra).
$(BENCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -e '.[all,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench

reliability: $(STAMP)
	MEMKIT_FULL=1 $(BIN)/python -m pytest tests/reliability/test_reliability_*.py -s

# The dependency floors pyproject.toml states, tested: a venv of its own holding the oldest versions it
# allows, the kit without dependencies, and the tests of what those packages serve (the agent's tool
# schemas; the classroom's tables, charts, views and inspector). Not part of `make test`: it downloads.
FLOORS_VENV := .venv-floors
FLOORS := jsonschema==4.20.0 pandas==2.2.2 matplotlib==3.8.0 ipywidgets==8.1.0
floors:
	$(check_python)
	$(PYTHON) -m venv $(FLOORS_VENV)
	$(FLOORS_VENV)/bin/python -m pip install --quiet $(FLOORS) pytest pyyaml hypothesis
	$(FLOORS_VENV)/bin/python -m pip install --quiet --no-deps -e .
	$(FLOORS_VENV)/bin/python -m pytest -q -o addopts= tests/agent/test_agent.py tests/agent/test_tools.py \
	    tests/agent/test_approvals.py tests/notebooks/test_notebook_tables.py tests/notebooks/test_notebook_charts.py \
	    tests/notebooks/test_notebook_views.py tests/notebooks/test_notebook_inspector.py \
	    -k "not postgresql"  # PostgreSQL, which the floors leave out

clean:
	rm -rf $(VENV) $(FLOORS_VENV) .pytest_cache

# The two commands the README opens with: `make demo` and `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip

.PHONY: demo test lint imports typecheck docs bench bench-locomo clean

$(VENV)/bin/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# [mcp]: the demo ends with `coffer agents install`, which registers coffer-mcp (the MCP SDK is an
# extra since session 16). PYTHONWARNINGS: setuptools' editable-install banner is a warning from the build backend, not news.
$(VENV)/.installed: $(VENV)/bin/python pyproject.toml
	PYTHONWARNINGS=ignore $(PIP) install -q -e ".[mcp]"
	touch $@

$(VENV)/.installed-dev: $(VENV)/bin/python pyproject.toml
	$(PIP) install -q -e ".[dev]"
	touch $(VENV)/.installed $@

DEMO_ARGS ?=
demo: $(VENV)/.installed
	@$(PY) -m coffer_memory.demo $(DEMO_ARGS)

# Two pytest workers (pytest-xdist): the suite waits on subprocesses, servers and PostgreSQL about
# half its wall time, so one process left a core idle; run serially with `make test TEST_WORKERS=0`.
# loadfile keeps each file's tests (and its module fixtures) on one worker. The schemathesis file
# runs in a pytest of its own: its 48 operations share one test id, and under xdist a failing
# operation was reported as that id's one pass (the file skips itself in an xdist worker).
TEST_WORKERS ?= 2
test: $(VENV)/.installed-dev
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadfile
	if [ "$(TEST_WORKERS)" != "0" ]; then $(PY) -m pytest -q -p no:xdist tests/test_rest_schemathesis.py; fi
	$(MAKE) lint imports typecheck docs

lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check coffer_memory coffer_memory_fastapi coffer_memory_mcp tests bench
	$(VENV)/bin/ruff format --check coffer_memory coffer_memory_fastapi coffer_memory_mcp tests bench

# The import contracts in pyproject.toml: layers, no cycles, no web/MCP import in the core.
imports: $(VENV)/.installed-dev
	$(VENV)/bin/lint-imports

typecheck: $(VENV)/.installed-dev
	$(VENV)/bin/mypy

docs: $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir $(CURDIR)/.site

bench: $(VENV)/.installed-dev
	$(PY) bench/core.py

bench-locomo: $(VENV)/.installed-dev
	$(PY) bench/locomo.py

clean:
	rm -rf $(VENV) .site .pytest_cache .mypy_cache .ruff_cache

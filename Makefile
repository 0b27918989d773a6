# Two commands do everything: `make run` and `make test`. Both build .venv first.
PYTHON ?= python3
UV_VERSION := 0.13.9
VENV := .venv
TOOLS := .tools
UV := $(TOOLS)/bin/uv
export UV_PYTHON_DOWNLOADS := never
export UV_PROJECT_ENVIRONMENT := $(VENV)

.PHONY: install run test quick lint typecheck unit bench clean dist sdk-wheel sdk-sync

install: $(VENV)/.installed

$(UV):
	$(PYTHON) -m venv $(TOOLS)
	$(TOOLS)/bin/pip install --quiet uv==$(UV_VERSION)

$(VENV)/.installed: pyproject.toml uv.lock clients/python/pyproject.toml | $(UV)
	$(UV) sync --frozen --compile-bytecode --python $(PYTHON)
	touch $@

# `make run PORT=8001` when something else listens on 8000 (the Python client and the
# README's examples then need SOLARAPI_BASE_URL=http://127.0.0.1:8001). Only the command line
# sets it: a PORT in the environment is left alone.
PORT = 8000

run: install
	$(VENV)/bin/solarapi migrate
	$(VENV)/bin/solarapi demo
	@echo "Dashboard: http://127.0.0.1:$(PORT)/  (log in with a demo e-mail above)"
	@echo "Sign-ups start on the '$${SOLARAPI_SIGNUP_PLAN:-starter}' plan; to sign up as Pro: SOLARAPI_SIGNUP_PLAN=pro make run"
	@echo "  (or change an account later: .venv/bin/solarapi accounts set-plan EMAIL pro)"
	@echo "API docs:  http://127.0.0.1:$(PORT)/api/v1/docs"
	$(VENV)/bin/solarapi serve --host 127.0.0.1 --port $(PORT)

lint: install
	$(VENV)/bin/ruff check src tests bench clients
	$(VENV)/bin/ruff format --check src tests bench clients
	$(VENV)/bin/lint-imports

typecheck: install
	$(VENV)/bin/mypy

# Hypothesis runs derandomized here (the same examples every run); `HYPOTHESIS_PROFILE=dev`
# explores random ones.
HYPOTHESIS_PROFILE ?= ci
export HYPOTHESIS_PROFILE

unit: install
	$(VENV)/bin/pytest -n auto $(PYTEST_ARGS)

test: lint typecheck unit

# The inner loop: lint and the SQLite half of the tests (no PostgreSQL, Redis, browser or
# server processes).
quick: lint
	SOLARAPI_TEST_DATABASES=sqlite $(VENV)/bin/pytest -n auto \
		-m "not services and not browser and not slow" $(PYTEST_ARGS)

# The service's wheel (migrations and dashboard templates/static inside) and the SDK's, in dist/.
dist: | $(UV)
	rm -rf dist
	$(UV) build --wheel --out-dir dist .
	$(UV) build --wheel --out-dir dist clients/python

bench: install
	@echo "see bench/README.md"

clean:
	rm -rf $(VENV) $(TOOLS) .mypy_cache .pytest_cache .ruff_cache

# The Python SDK as a wheel (clients/python): installs with pip or uv, offline from the wheel
# and a cache holding httpx and its dependencies.
SDK_DIST ?= dist/sdk
sdk-wheel: install
	$(UV) build --offline --wheel --out-dir $(SDK_DIST) clients/python
	@ls $(SDK_DIST)/solarapi_client-*.whl


# The SDK's synchronous clients (clients/python/src/solarapi_client/_sync.py) are generated
# from the asynchronous ones (_async.py): run this after changing _async.py (a test fails while
# the committed file differs from what this writes).
sdk-sync: install
	$(VENV)/bin/python clients/python/scripts/generate_sync.py

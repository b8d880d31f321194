# Two commands on a fresh machine:
#   make run    set up .venv (idempotent) and run the main job: the tiny cascade on CPU, end to end
#   make test   set up .venv and run the whole test suite (unit, dist, integration; GPU tests skip without one)
VENV ?= .venv
PY := $(VENV)/bin/python
RUN_ROOT ?= runs

.PHONY: setup run test test-unit test-fast bench clean
setup:
	@bash tools/setup_venv.sh

run: setup
	$(VENV)/bin/nemo-cascade run recipes/tiny.py run_root=$(RUN_ROOT)

test: setup
	$(PY) -m pytest -q -ra --durations=15

test-unit: setup
	$(PY) -m pytest -q tests/unit

# Everything but the torchrun and vLLM tiers (seconds to a minute).
test-fast: setup
	$(PY) -m pytest -q -m "not dist and not integration and not slow"

bench: setup
	$(PY) bench/step_breakdown.py

clean:
	rm -rf $(RUN_ROOT) .pytest_cache

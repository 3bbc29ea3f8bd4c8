# Shortcuts for the project's scripts; every target works on a fresh clone (scripts/setup.sh installs
# what is missing). `make test` is exactly the README's `bash scripts/test.sh` (and CI's .ci/run).
.PHONY: test test-unit test-integration lint bench demo setup

PYTEST = HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false .venv/bin/python -m pytest -p no:cacheprovider

setup:
	bash scripts/setup.sh --servers

test:
	bash scripts/test.sh -q

# Tests that need no server (the integration marker is applied in tests/conftest.py).
test-unit: setup
	$(PYTEST) -q -m "not integration"

# Tests against real PostgreSQL + pgvector, Redis and OpenSearch, started on 127.0.0.1 by the fixtures.
test-integration: setup
	COGNIS_REQUIRE_SERVERS=1 $(PYTEST) -q -m integration

lint:
	bash scripts/setup.sh
	bash scripts/lint.sh

# The LoCoMo retrieval benchmark (recall@k and latency of the default recipe); data outside the repo,
# see docs/benchmarks.md. BENCH_ARGS passes more options, e.g. BENCH_ARGS="--recipes default,architecture".
bench:
	bash scripts/setup.sh
	HF_HUB_OFFLINE=1 .venv/bin/python scripts/bench_locomo.py $(BENCH_ARGS)

demo:
	bash scripts/demo.sh

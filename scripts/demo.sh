#!/usr/bin/env bash
# Run the service on the embedded default store with a small demo conversation loaded.
# Fresh machine to running API in one command: set-up, import, a sample search, then serve.
#   COGNIS_PORT (default 8080), COGNIS_DATA_DIR (default .cognis), COGNIS_API_KEYS (default demo-key=default:
#   tenant 'default', the CLI's default tenant, so what you import with the CLI is served to the demo key too)
#   Facts with an LLM: COGNIS_LLM=bedrock (AWS credentials), or COGNIS_LLM=openai with COGNIS_OPENAI_BASE_URL and
#   COGNIS_OPENAI_MODEL (any OpenAI-compatible server; a local model: docs/local-llm.md) before the command.
set -euo pipefail
cd "$(dirname "$0")/.."

# The core install only (about 390 MB, no torch): what the service needs. scripts/setup.sh (run by
# scripts/test.sh) installs every extra for development on top of it.
PYTHON=${PYTHON:-python3.11}
command -v "$PYTHON" >/dev/null || PYTHON=python3
if [[ ! -x .venv/bin/python ]]; then
  echo "demo: creating .venv with $($PYTHON --version)"
  "$PYTHON" -m venv .venv
fi
full=.venv/.cognis-installed core=.venv/.cognis-core-installed
if [[ ! -f $full || pyproject.toml -nt $full ]] && [[ ! -f $core || pyproject.toml -nt $core ]]; then
  echo "demo: installing cognis-memory (the core: no torch, no extras) into .venv"
  .venv/bin/pip install --quiet --upgrade pip setuptools wheel
  .venv/bin/pip install --quiet -e .
  touch "$core"
fi

export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export COGNIS_DATA_DIR=${COGNIS_DATA_DIR:-.cognis}
export COGNIS_API_KEYS=${COGNIS_API_KEYS:-demo-key=default}
export COGNIS_PORT=${COGNIS_PORT:-8080}
cli=.venv/bin/cognis-memory
# The demo's data goes to the tenant of the first listed key, so that key reads it.
first=${COGNIS_API_KEYS%%,*} && key=${first%%=*} && tenant=${first#*=} && tenant=${tenant%%:*}
# What the printed commands add to reach this demo's store and tenant from another terminal.
where=""
[[ $COGNIS_DATA_DIR == .cognis ]] || where+=" --data-dir $(printf %q "$COGNIS_DATA_DIR")"
[[ $tenant == default ]] || where+=" --tenant $(printf %q "$tenant")"

echo "demo: importing examples/demo_conversation.jsonl for tenant '$tenant', user 'demo-user'"
"$cli" import examples/demo_conversation.jsonl --tenant "$tenant" --user demo-user --quiet --telemetry off
show() {  # a sample search: the top three memories with their scores
  echo "demo: a sample search: $1"
  "$cli" search --tenant "$tenant" --user demo-user --limit 3 "$1" --telemetry off \
    | .venv/bin/python -c 'import json, sys
for r in json.load(sys.stdin)["results"]:
    print("  %.3f  %s" % (r["score"], r["memory"]["content"]))'
}
show "Is Maya still vegetarian?"
show "Where does Maya live now?"
if [[ "${COGNIS_LLM:-none}" == none ]]; then
  cat <<'NOTE'
demo: no extraction LLM is configured (COGNIS_LLM=none, the default), so the memory ranks what was said
      without understanding it. A present-state question puts the newest of *similar* statements first
      ("I am not vegetarian anymore" above "I have been vegetarian"), but "I moved to Lisbon" is not
      similar enough to "I live in Porto with my dog" to be taken for its update: Porto still comes first.
      With an LLM, facts are extracted and added, updated or retired against the stored ones:
      COGNIS_LLM=bedrock, or COGNIS_LLM=openai with COGNIS_OPENAI_BASE_URL and COGNIS_OPENAI_MODEL
      (a local model: docs/local-llm.md). What that gives with which model, as measured: README, "Changing facts".
NOTE
fi

# Each command printed here is run by tests/test_demo_script.py, which checks it gives what its comment says.
cat <<MSG

cognis-memory is starting on http://127.0.0.1:${COGNIS_PORT}  (docs: http://127.0.0.1:${COGNIS_PORT}/docs)
Memory inspector: http://127.0.0.1:${COGNIS_PORT}/ui/  (API key: ${key})
Try, from another terminal in this directory:
  # over HTTP, the three memories most relevant to a question, best first (results[].memory.content):
  # Maya's first bouldering and her move to Lisbon, each said to have happened on a weekend
  curl -s -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' \\
       -d '{"query": "What did Maya do last weekend?", "limit": 3}' \\
       http://127.0.0.1:${COGNIS_PORT}/v1/users/demo-user/search
  # the same search with the CLI, on the same store while the server runs
  ${cli} search${where} --user demo-user --limit 3 "What did Maya do last weekend?"
  # the user's memories as JSON lines, the first three
  ${cli} export${where} --user demo-user | head -n 3
MSG
exec "$cli" serve --host 127.0.0.1 --port "$COGNIS_PORT"

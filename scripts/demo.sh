#!/usr/bin/env bash
# Run the service on the embedded default store with a small demo conversation loaded.
# Fresh machine to running API in one command: set-up, import, a sample search, then serve.
#   COGNIS_PORT (default 8080), COGNIS_DATA_DIR (default .cognis), COGNIS_API_KEYS (default demo-key=demo)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

export HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
export COGNIS_DATA_DIR=${COGNIS_DATA_DIR:-.cognis}
export COGNIS_API_KEYS=${COGNIS_API_KEYS:-demo-key=demo}
export COGNIS_PORT=${COGNIS_PORT:-8080}
cli=.venv/bin/cognis-memory

echo "demo: importing examples/demo_conversation.jsonl for tenant 'demo', user 'demo-user'"
"$cli" import examples/demo_conversation.jsonl --tenant demo --user demo-user --quiet
question="Is Maya still vegetarian?"  # a present-state question whose answer changed between the two sessions
echo "demo: a sample search: $question"
"$cli" search --tenant demo --user demo-user --limit 3 "$question" \
  | .venv/bin/python -c 'import json, sys
for r in json.load(sys.stdin)["results"]:
    print("  %.3f  %s" % (r["score"], r["content"]))'

key=${COGNIS_API_KEYS%%=*}
cat <<MSG

cognis-memory is starting on http://127.0.0.1:${COGNIS_PORT}  (docs: http://127.0.0.1:${COGNIS_PORT}/docs)
Memory inspector: http://127.0.0.1:${COGNIS_PORT}/ui/  (API key: ${key})
Try, from another terminal:
  curl -s -H 'Authorization: Bearer ${key}' -H 'Content-Type: application/json' \\
       -d '{"query": "What did the user do last weekend?", "limit": 3}' \\
       http://127.0.0.1:${COGNIS_PORT}/v1/users/demo-user/search
MSG
exec "$cli" serve --host 127.0.0.1 --port "$COGNIS_PORT"

#!/usr/bin/env python3
"""Stage a pinned reranker model in S3 for the SageMaker endpoint (cognis:rerankerModelS3Uri).

The endpoint runs with network isolation: it cannot reach the Hugging Face Hub, and it should
not anyway (an unpinned download at every instance start). This script puts one exact copy of
the model under an immutable S3 prefix; SageMaker copies that prefix to /opt/ml/model when an
instance starts (uncompressed S3Prefix model data) and TEI loads it from there.

    # a Hub revision (a full commit hash: branches and tags move), downloaded here:
    python3 scripts/stage_reranker_model.py --revision <40-hex commit> --stack prod
    # or a directory you already have (save_pretrained / a Hub snapshot):
    python3 scripts/stage_reranker_model.py --model-dir ./bge-reranker-v2-m3 --stack prod

The prefix is ``s3://<bucket>/models/<model id>/<revision>/``; with --model-dir the revision is
--label, or ``sha256-<digest of the files>`` without one. A manifest (``cognis-model.json``:
every file with its SHA-256 and size) is written last: a prefix with a manifest is complete.
Staging the same files again is a no-op; different files under an existing prefix are refused.

The default bucket, ``cognis-models-<account>-<region>``, is created when missing: no public
access, SSE-S3 encryption, versioning, TLS-only bucket policy. It is shared by every stack of the
account and region (dev and prod run the same pinned weights) and is not managed by any stack.
Unless --no-config, the URI is set with ``pulumi config set cognis:rerankerModelS3Uri``.

Needs AWS credentials for the account (boto3's usual chain), boto3 and this checkout's ``devtools``
package (``cognis_dev.reranker_staging`` holds the code; the project's .venv has both, or
``pip install boto3`` and ``pip install --no-deps -e ./devtools`` in any Python environment); --revision also needs
``huggingface_hub`` and access to the Hub from this machine.
"""

from __future__ import annotations

import sys

try:
    from cognis_dev.reranker_staging import main
except ModuleNotFoundError as e:  # an operator's Python without the devtools package
    if not (e.name or "").startswith("cognis_dev"):
        raise
    print(
        f"{e}: install this checkout's devtools package without its test dependencies (pip install --no-deps -e ./devtools)",
        file=sys.stderr,
    )
    sys.exit(2)

if __name__ == "__main__":
    sys.exit(main())

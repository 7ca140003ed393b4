#!/usr/bin/env bash
# Runs LocalStack's S3 on the host without Docker (host mode), from .venv-localstack.
# Usage: localstack/run-host.sh [PORT]   (default 4566); Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT="${1:-4566}"
bash localstack/setup-venv.sh
SCRATCH="$(mktemp -d -t localstack-XXXXXX)"
mkdir -p "$SCRATCH/fs" "$SCRATCH/tmp" "$SCRATCH/cache"
trap 'rm -rf "$SCRATCH"' EXIT
export SERVICES=s3 GATEWAY_LISTEN="127.0.0.1:$PORT" GATEWAY_SERVER=hypercorn \
  DNS_ADDRESS=0 DISABLE_EVENTS=1 SKIP_SSL_CERT_DOWNLOAD=1 \
  FILESYSTEM_ROOT="$SCRATCH/fs" TMPDIR="$SCRATCH/tmp" XDG_CACHE_HOME="$SCRATCH/cache" \
  AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-testing}" AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-testing}" \
  AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
echo "LocalStack S3 on http://127.0.0.1:$PORT (health: /_localstack/health)"
exec "${LOCALSTACK_VENV:-.venv-localstack}/bin/python" -m localstack.runtime.main

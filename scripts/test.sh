#!/usr/bin/env bash
# Install aiden with its test extras into .venv (scripts/install.sh) and run the test suite.
# Expected duration on 2 cores: about 5 minutes for the tests, plus about a minute for the
# installation on the first run (skipped afterwards while pyproject.toml is unchanged).
# Arguments go to pytest: `bash scripts/test.sh tests/cli -x` runs one directory.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
echo "running the test suite (about 5 minutes on 2 cores; one line per test file, with its share done)"
exec .venv/bin/python -m pytest --durations=5 "$@"

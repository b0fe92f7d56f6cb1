"""The pure policy package stays at 100% branch coverage (enforced in every test run).

Measured in a subprocess over the policy tests only: coverage's tracer breaks
PyYAML's C emitter in this process (seen with coverage 7.17 + PyYAML 6.0.4), so
the rest of the suite runs untraced.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(os.environ.get("AIDEN_POLICY_COVERAGE_CHILD") == "1", reason="inside the coverage run")
def test_policy_package_has_full_branch_coverage() -> None:
    pytest.importorskip("pytest_cov")
    env = {**os.environ, "AIDEN_POLICY_COVERAGE_CHILD": "1"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/policy", "-q", "-p", "no:cacheprovider",
         "--cov=aiden.policy", "--cov-branch", "--cov-report=term-missing:skip-covered",
         "--cov-config=tests/policy/coverage.ini",
         "--cov-fail-under=100",
         # The langsmith pytest plugin (no policy test uses it) imports ~1 s of client code at startup.
         "-p", "no:langsmith_plugin"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    assert "Required test coverage of 100% reached" in out.stdout

"""The built wheel installs into a fresh venv and imports without the source tree."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import aiden

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.timeout(300)

CHECK = """
import importlib.metadata, importlib.resources, sys
import aiden
assert aiden.__file__.startswith(sys.prefix), aiden.__file__
print(importlib.metadata.version("aiden-memory"), aiden.__version__)
files = importlib.resources.files("aiden")
assert (files / "py.typed").is_file()
assert (files / "summarizers" / "prompts" / "summarize.md").is_file()
print(importlib.metadata.metadata("aiden-memory")["License-Expression"])
"""


@pytest.mark.skipif(
    bool(os.environ.get("CI")), reason="CI: .ci/run installs the wheel with its dependencies after the tests"
)
def test_the_wheel_installs_and_imports_in_a_fresh_venv(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT)],
        check=True,
        capture_output=True,
        cwd=tmp_path,
    )
    (wheel,) = wheels.glob("aiden_memory-*.whl")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, capture_output=True)
    # The dependencies come from this test run's environment. aiden is there only as an editable
    # install's .pth hook, which a PYTHONPATH entry never runs: CHECK asserts that the aiden
    # imported is the wheel installed in the fresh venv.
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    out = subprocess.run([str(python), "-c", CHECK], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [f"{aiden.__version__} {aiden.__version__}", "MIT"]

"""nox sessions: tests (3.11-3.13), wheel (3.11-3.13), lint, typecheck, reliability, bench.

The version-matrix sessions run on each of 3.11, 3.12 and 3.13 whose interpreter
is installed and are skipped (not failed) for the others, also under CI.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True
# nox turns a missing interpreter into an error when CI is set; the matrix is "where it exists".
nox.options.error_on_missing_interpreters = False

PYTHONS = ["3.11", "3.12", "3.13"]
"""The versions the classifiers name (pyproject.toml)."""

ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


@nox.session(python=PYTHONS)
def tests(session: nox.Session) -> None:
    """The test suite (what CI runs), on each supported Python found."""
    session.install("-e", ".[test]")
    session.run("pytest", "-n", "2", "--dist", "worksteal", *session.posargs, env=ENV)


@nox.session(python=PYTHONS)
def wheel(session: nox.Session) -> None:
    """The built wheel installs (with its dependencies) into the session's venv and imports outside the tree."""
    tmp = str(Path(session.create_tmp()) / "wheel")
    shutil.rmtree(tmp, ignore_errors=True)  # the session tmp is reused: no wheel of an earlier version
    session.install("setuptools>=77")
    session.run("pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", tmp, ".")
    wheels = sorted(Path(tmp).glob("aiden_memory-*.whl"))
    if len(wheels) != 1:
        session.error(f"expected one aiden_memory wheel in {tmp}, found {len(wheels)}")
    # A reused venv may hold an earlier build of the same version: replace aiden, then resolve its dependencies.
    session.install("--force-reinstall", "--no-deps", str(wheels[0]))
    session.install(str(wheels[0]))
    with session.chdir(session.create_tmp()):
        session.run(
            "python",
            "-c",
            "import sys, aiden; assert aiden.__file__.startswith(sys.prefix); print(aiden.__version__)",
        )


@nox.session(python="3.11")
def reliability(session: nox.Session) -> None:
    """The full reliability suite, including the slow crash matrix seeds."""
    session.install("-e", ".[test]")
    session.run("pytest", "tests/reliability", "--run-slow", "-v", *session.posargs, env=ENV)


@nox.session(python="3.11")
def lint(session: nox.Session) -> None:
    """ruff."""
    session.install("ruff>=0.6")
    session.run("ruff", "check", "aiden", "tests", "benchmarks", "examples", "noxfile.py")


@nox.session(python="3.11")
def typecheck(session: nox.Session) -> None:
    """mypy --strict over the package."""
    session.install("-e", ".[dev]")
    session.run("mypy", "--strict", "aiden")


@nox.session(python="3.11")
def bench(session: nox.Session) -> None:
    """Benchmarks: writes benchmarks/results/*.json, the markdown table and the plot."""
    session.install("-e", ".[test,bench]")
    session.run("python", "benchmarks/run_all.py", *session.posargs, env=ENV)

"""nox sessions: tests, lint, typecheck, reliability, bench."""

from __future__ import annotations

import nox

nox.options.sessions = ["tests", "lint", "typecheck"]
nox.options.reuse_existing_virtualenvs = True

ENV = {"LITELLM_LOCAL_MODEL_COST_MAP": "True"}


@nox.session(python="3.11")
def tests(session: nox.Session) -> None:
    """The test suite (what CI runs)."""
    session.install("-e", ".[test]")
    session.run("pytest", *session.posargs, env=ENV)


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

"""Reliability suite fixtures: run mode (CI subset vs full), seeds, the child fork server.

The full run (more seeds, more power-loss prefixes, more mutations) is selected by
``--run-slow`` or by ``AIDEN_RELIABILITY_FULL=1``. pytest only registers a
command-line option from a conftest it loads *before* parsing the command line:
this file is such a conftest when ``tests/reliability`` (or a file in it) is
named on the command line (``pytest tests/reliability --run-slow``, as
``nox -s reliability`` does). From any other invocation use the environment
variable.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.reliability.harness import ForkServer, full_mode, serving


def pytest_addoption(parser: pytest.Parser) -> None:
    try:
        parser.addoption(
            "--run-slow",
            action="store_true",
            default=False,
            help="reliability suite: run every seed / prefix / mutation (also AIDEN_RELIABILITY_FULL=1)",
        )
    except ValueError:
        # Already registered by another conftest or plugin.
        pass


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "seeds(ci, full): parametrize a reliability test over `ci` seeds, or `full` seeds in a full run"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    marker = metafunc.definition.get_closest_marker("seeds")
    if marker is None or "seed" not in metafunc.fixturenames:
        return
    ci = marker.kwargs.get("ci", marker.args[0] if marker.args else 1)
    full = marker.kwargs.get("full", marker.args[1] if len(marker.args) > 1 else 5)
    n = full if full_mode(metafunc.config) else ci
    metafunc.parametrize("seed", list(range(n)), ids=[f"seed{i}" for i in range(n)])


@pytest.fixture(scope="session")
def full_run(pytestconfig: pytest.Config) -> bool:
    return full_mode(pytestconfig)


@pytest.fixture(scope="session")
def fork_server() -> Iterator[ForkServer | None]:
    """One process that imported aiden, forking each child (``AIDEN_RELIABILITY_NOFORK=1``: plain subprocesses)."""
    with serving() as server:
        yield server

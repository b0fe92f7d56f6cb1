"""Shared fixtures: the anyio backend (asyncio by default) and real-data discovery."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

# No per-example deadline (hypothesis's default is 200 ms): a wall-clock bound in a test fails on a
# loaded machine, not on slow code. Explicit @settings still override what they name.
settings.register_profile("aiden", deadline=None)
settings.load_profile("aiden")

# The conformance suite ships in aiden.testing: pytest rewrites its asserts so failures show
# values. Registered here, in the root conftest, because any test module may import
# aiden.testing first (a registration in tests/store/ came too late in a full run).
pytest.register_assert_rewrite(
    "aiden.testing.conformance",
    "aiden.testing.conformance_changes",
    "aiden.testing.conformance_commit",
    "aiden.testing.conformance_property",
    "aiden.testing.storekit",
)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def real_data() -> Iterator[Path]:
    """The folder of real agent sessions, or a clean skip saying why."""
    value = os.environ.get("AIDEN_REAL_DATA")
    if not value:
        pytest.skip("AIDEN_REAL_DATA is not set: real agent sessions unavailable")
    path = Path(value)
    if not (path / "swe-agent").is_dir():
        pytest.skip(f"AIDEN_REAL_DATA={value} has no swe-agent/ folder")
    yield path

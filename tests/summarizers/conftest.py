"""Fixtures of the summarizer tests: trio with a MockClock, and litellm imported once."""

from __future__ import annotations

import os
from typing import Any

import pytest
from trio.testing import MockClock

# Before anything can import litellm: never fetch the model cost map over the network.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"


@pytest.fixture
def anyio_backend() -> tuple[str, dict[str, Any]]:
    """trio with a virtual clock that jumps whenever every task is blocked: no real sleeping."""
    return ("trio", {"clock": MockClock(autojump_threshold=0)})


@pytest.fixture(scope="session")
def litellm_ready() -> None:
    """Import litellm once per session, outside any test's deadline (it takes seconds)."""
    from aiden.summarizers.llm import _import_litellm

    _import_litellm()

"""Fixtures of the embedding tests: litellm imported once, outside any test's deadline."""

from __future__ import annotations

import os

import pytest

# Before anything can import litellm: never fetch the model cost map over the network.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"


@pytest.fixture(scope="session")
def litellm_ready() -> None:
    """Import litellm once per session (it takes seconds)."""
    from aiden.summarizers.llm.client import _import_litellm

    _import_litellm()

"""Fixtures of the integration tests: litellm imported once, offline and quiet."""

from __future__ import annotations

import os
from typing import Any

import pytest

# Before anything can import litellm: never fetch the model cost map over the network.
os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"


@pytest.fixture(scope="session")
def litellm() -> Any:
    """The litellm module, imported once per session (it takes seconds) the way aiden imports it."""
    from aiden.summarizers.llm.client import _import_litellm

    _import_litellm()
    import litellm

    return litellm

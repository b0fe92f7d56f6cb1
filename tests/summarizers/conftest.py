"""Fixtures of the summarizer tests: trio with a MockClock, litellm imported once, and one demo run."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from typing import Any

import anyio
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
    from aiden.summarizers.llm.client import _import_litellm

    _import_litellm()


@dataclass(frozen=True)
class DemoRun:
    """What one ``run_demo`` with its defaults left: its summary.md and each chunk's stored summary."""

    summary_md: str
    chunk_summaries: tuple[str, ...]


@pytest.fixture(scope="session")
def demo_run() -> DemoRun:
    """``run_demo`` once per session (~2 s), in a root gone before any test sees the result.

    Read by ``test_summary_information`` (every chunk says what happened) and by
    ``test_summary_quality``'s benchmark summaries: immutable strings, so no test can
    change what another reads, nor depend on running first.
    """
    from aiden.demo import run_demo
    from aiden.readonly import load_entries, open_layout

    async def run() -> DemoRun:
        with tempfile.TemporaryDirectory() as root:
            demo = await run_demo(root, echo=lambda _line: None)
            _index, entries = load_entries(open_layout(root))
            return DemoRun(demo.summary_md, tuple(e.summary for e in entries))

    return anyio.run(run)

"""Sessions ending within one second keep their order (hunt carry60 section 1).

Summaries were ordered by a one-second stamp, then a random id: the newest session could lose to an
older one in the block, and the cap deleted summaries it took for merged ones. The conformance suite
holds both backends to the order with a fixed clock; this runs it end to end on the wall clock.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import aiden
from aiden import Config

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # a real runtime: threads and files


async def test_sessions_ending_within_a_second_all_reach_the_block_and_the_newest_wins(tmp_path: Path) -> None:
    config = Config(durability="none", session_summaries_keep=2)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        for i in range(1, 9):
            await memory.begin_run(f"The staging port is {8000 + i}.", new_session=True)
            await memory.commit_run(f"Service {i} listens on port {5000 + i}.")
        await memory.begin_run("What next?", new_session=True)
        layer = memory.long_term_layer
    assert re.findall(r"The staging port is (\d+)\.", layer) == ["8008"], layer
    missing = [i for i in range(1, 9) if f"Service {i} listens on port {5000 + i}." not in layer]
    assert missing == [], layer

"""[Reliability] finding 7: a rotation is not starved by maintenance running in a loop."""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import msgspec
import pytest

import aiden
from aiden.testing import SlowSummarizer
from tests.helpers import SMALL_MANUAL

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio"])]


async def test_rotations_complete_within_a_pass_under_a_maintain_loop(tmp_path: Path) -> None:
    # Every pass takes ~0.2 s in the summarizer; each rotation must wait for at most about one.
    config = msgspec.structs.replace(SMALL_MANUAL, count_compress_after_events=4, lock_timeout_s=5.0)
    waits: list[float] = []
    async with aiden.open_memory(tmp_path, config=config, summarizer=SlowSummarizer(0.2)) as memory:
        stop = anyio.Event()

        async def maintain_loop() -> None:
            n = 0
            while not stop.is_set():
                await memory.append_many(
                    aiden.SessionEvent(type="user_input", role="user", content=f"turn {n} {k}") for k in range(6)
                )
                n += 1
                await memory.maintain(manual=True)

        async with anyio.create_task_group() as tg:
            tg.start_soon(maintain_loop)
            tg.start_soon(maintain_loop)
            await anyio.sleep(0.3)
            for _ in range(3):
                started = time.monotonic()
                await memory.rotate()
                waits.append(time.monotonic() - started)
            stop.set()
    assert len(waits) == 3
    assert max(waits) < 4.0, waits  # far below lock_timeout_s: a rotation never waits out the lock

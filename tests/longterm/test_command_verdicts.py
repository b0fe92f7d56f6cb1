"""A command that failed in one compacted range and worked in a later one (or the reverse) is listed
once in PROJECT MEMORY, as the later range found it.

The running summary merges each compacted range's summary into the one before; a merge deduped
within a section only, so the command stood under FAILED APPROACHES and WORKING RECIPES at once.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import aiden
from aiden import SessionEvent

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

CONFIG = aiden.Config(
    keep_recent_tokens=60, hot_window_events=4, count_compress_after_events=10**6, durability="none"
)
FAILED = "E   IndexError: list index out of range\n1 failed"
PASSED = "12 passed in 0.4s"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # a real runtime: threads and files


async def _layer(root: Path, runs: list[tuple[str, str]]) -> str:
    """PROJECT MEMORY after a session whose each (command, output) is compacted in its own pass."""
    async with aiden.open_memory(root, config=CONFIG) as memory:
        await memory.append(SessionEvent(type="user_input", content="The CSV importer crashes on empty rows. Fix it."))
        for n, (command, output) in enumerate(runs):
            call = f"c{n}"
            await memory.append(SessionEvent(type="tool_call", tool_name="shell", tool_call_id=call,
                                             tool_args=json.dumps({"command": command})))
            await memory.append(SessionEvent(type="tool_result", tool_name="shell", tool_call_id=call, content=output))
            for step in range(8):
                await memory.append(SessionEvent(type="assistant_output", content=f"Pass {n} step {step}: " + "ok " * 20))
            assert (await memory.maintain(manual=True)).compacted
        await memory.rotate()
        return memory.long_term_layer


def _section(layer: str, heading: str) -> list[str]:
    """The lines of ``layer``'s section whose heading starts with ``heading``."""
    lines = layer.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(heading)), None)
    if start is None:
        return []
    body = lines[start + 1:]
    end = next((i for i, line in enumerate(body) if not line.startswith("- ")), len(body))
    return body[:end]


async def test_a_command_that_failed_then_worked_is_listed_once_as_a_recipe(tmp_path: Path) -> None:
    layer = await _layer(tmp_path, [("pytest tests/test_import.py -x", FAILED), ("pytest tests/test_import.py -x", PASSED)])
    assert _section(layer, "WORKING RECIPES") == ["- $ pytest tests/test_import.py -x"]
    assert "failed: E IndexError" not in layer


async def test_a_command_that_worked_then_failed_is_listed_once_as_failed(tmp_path: Path) -> None:
    layer = await _layer(tmp_path, [("pytest tests/test_import.py -x", PASSED), ("pytest tests/test_import.py -x", FAILED)])
    assert _section(layer, "FAILED APPROACHES") == [
        "- $ pytest tests/test_import.py -x failed: E IndexError: list index out of range"
    ]
    assert _section(layer, "WORKING RECIPES") == []


async def test_a_different_command_keeps_its_own_verdict(tmp_path: Path) -> None:
    layer = await _layer(tmp_path, [("pytest tests/test_import.py -x", FAILED), ("pytest tests/test_export.py", PASSED)])
    assert _section(layer, "WORKING RECIPES") == ["- $ pytest tests/test_export.py"]
    assert _section(layer, "FAILED APPROACHES") == [
        "- $ pytest tests/test_import.py -x failed: E IndexError: list index out of range"
    ]

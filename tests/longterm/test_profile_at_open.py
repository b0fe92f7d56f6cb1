"""[Integrations]: a save_memory followed by the process exiting before the debounced profile rebuild
never reached a later prompt (the entry was on disk, profile.md was never built, nothing rebuilt it
on open). Now opening a memory rebuilds a stale profile.md first."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

import aiden
from aiden.storage.layout import Layout
from tests.helpers import SMALL_MANUAL

pytestmark = pytest.mark.anyio

CHILD = textwrap.dedent(
    """
    import json, os, sys
    import anyio, aiden

    async def main() -> None:
        async with aiden.open_memory(sys.argv[1], config=aiden.Config(durability="none")) as memory:
            answer = await memory.handle_tool_call("save_memory", json.dumps(
                {"type": "preference", "title": "Package manager", "content": "Always use pnpm, never npm.", "id": "pm"}
            ))
            assert json.loads(answer)["saved"]["id"] == "pm", answer
            os._exit(0)  # the process ends here: no close, no debounced rebuild

    anyio.run(main)
    """
)


async def test_memory_saved_just_before_exit_reaches_the_next_prompt(tmp_path: Path) -> None:
    done = await anyio.run_process([sys.executable, "-c", CHILD, str(tmp_path)], check=False)
    assert done.returncode == 0, done.stderr.decode()
    layout = Layout(tmp_path)
    assert (layout.long_term / "memories" / "pm.md").exists()
    profile = layout.long_term / "profile.md"
    assert "pnpm" not in (profile.read_text() if profile.exists() else "")
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        assert "Always use pnpm, never npm." in memory.long_term_layer
        built = await memory.build_messages()
        assert "Always use pnpm, never npm." in json.dumps(built.messages)

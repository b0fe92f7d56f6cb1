"""[Long-term] The long-term layer reaches the prompt as data (sections, items, ages), cut on that data.

Before, the prompt's cut split the rendered PROJECT MEMORY block back into paragraphs and bullets and
took the last bullet as the newest: the GOAL section lists its newest goal first, so a cut keeping
one goal kept the older, superseded one. The profile was read back from profile.md's text the same way.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

import aiden
from aiden import Config, PromptLayers, Storage
from aiden.context.summary_fit import LONG_TERM_NOTE_PREFIX

pytestmark = pytest.mark.anyio

INTRO = "PROJECT MEMORY\nDurable knowledge from earlier sessions of this project (newest wins on conflicts)."


async def _cut_layers(memory: aiden.Memory, start: str) -> list[str]:
    """The long-term layer (from ``start``, the system message's last part) of the prompts built beside
    ever larger base instructions in a 4,000-token window, from the first cut while any of it is left."""

    async def layer(n: int) -> str:
        built = await memory.build_messages(PromptLayers(base_instruction="rule " * n))
        system = built.messages[0]["content"]
        return system[system.index(start) :] if start in system else ""

    n = 3000
    while n < 4000 and LONG_TERM_NOTE_PREFIX not in await layer(n + 25):
        n += 25
    layers = []
    while found := await layer(n):  # three words at a time: each item is ten or more words wide
        layers.append(found)
        n += 3
    assert layers[0] == memory.long_term_layer  # from the last prompt that holds the whole layer
    return layers


async def test_a_cut_that_keeps_one_goal_keeps_the_newest(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=Config(durability="none", context_window=4000)) as memory:
        await memory.begin_run("Migrate the billing service to Postgres 12.", now=1000.0)
        await memory.commit_run("Started the migration plan.")
        await memory.begin_run("Move the billing service back to MySQL 8.", new_session=True, now=100_000.0)
        await memory.commit_run("Rolling back.")
        await memory.begin_run("Check the billing tests.", new_session=True, now=200_000.0)
        assert memory.long_term_layer.startswith(
            f"{INTRO}\n\nGOAL (why this project exists)\n"
            "- Goal: Move the billing service back to MySQL 8.\n"
            "- Goal: Migrate the billing service to Postgres 12.\n\n"
        )
        layers = await _cut_layers(memory, "PROJECT MEMORY")
    one_goal = [layer for layer in layers if layer.count("- Goal:") == 1]
    assert one_goal, layers
    assert set(one_goal) == {
        f"{INTRO}\n\nGOAL (why this project exists)\n- Goal: Move the billing service back to MySQL 8.\n\n"
        f"{LONG_TERM_NOTE_PREFIX}3 items; long-term memory keeps them all.]"
    }


async def test_the_profile_gives_way_in_its_priority_order_newest_first(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=Config(durability="none", context_window=4000)) as memory:
        await memory.begin_run("hello")
        for kind in ("fact", "preference"):  # facts saved first: the order shown is the profile's, not the save's
            for i in range(3):
                saved = await memory.handle_tool_call(
                    "save_memory",
                    {"type": kind, "title": f"{kind} {i}", "content": f"The {kind} number {i}.", "id": f"{kind[0]}{i}"},
                )
                assert "saved" in json.loads(saved)
        await memory.commit_run("hi")
        await memory.begin_run("next task", new_session=True)
        layers = await _cut_layers(memory, "# PROFILE")
    priority = ["preference 2", "preference 1", "preference 0", "fact 2", "fact 1", "fact 0"]
    kept = {}
    for layer in layers:
        shown = re.findall(r"^- \*\*(\w+ \d)\*\*", layer, re.MULTILINE)
        # Each prompt keeps a prefix of the priority order, each section listed oldest first.
        prefix = priority[: len(shown)]
        assert shown == sorted(prefix, key=lambda t: (t.split()[0] != "preference", t)), layer
        kept[len(shown)] = layer
    assert set(kept) == {0, 1, 2, 3, 4, 6}  # one fact out and the note in are longer than the whole
    assert kept[4] == (
        "# PROFILE\n\nSynthesized from long-term memory (memories/); rebuilt automatically, do not edit.\n\n"
        "## Preferences\n"
        "- **preference 0**: The preference number 0. (p0)\n"
        "- **preference 1**: The preference number 1. (p1)\n"
        "- **preference 2**: The preference number 2. (p2)\n\n"
        "## Facts\n"
        "- **fact 2**: The fact number 2. (f2)\n\n"
        f"{LONG_TERM_NOTE_PREFIX}2 items; long-term memory keeps them all.]"
    )


class ProfileWritesFail(Storage):
    """Storage on which profile.md cannot be replaced once ``failing`` is set (a full or read-only disk)."""

    failing = False

    def write_atomic(self, path: str | os.PathLike[str], data: bytes, *, crash_prefix: str = "") -> None:
        if self.failing and Path(path).name == "profile.md":
            raise aiden.StorageError("profile.md: no space left on device")
        super().write_atomic(path, data, crash_prefix=crash_prefix)


async def test_a_forgotten_memory_leaves_the_prompt_though_profile_md_cannot_be_rewritten(tmp_path: Path) -> None:
    storage = ProfileWritesFail()
    async with aiden.open_memory(tmp_path, config=Config(durability="none"), storage=storage) as memory:
        await memory.begin_run("hello")
        for mid, content in (("pm", "Use pnpm."), ("ci", "Run the linters before pushing.")):
            await memory.handle_tool_call(
                "save_memory", {"type": "preference", "title": mid.upper(), "content": content, "id": mid}
            )
        await memory.commit_run("noted")
        await memory.begin_run("next", new_session=True)
        assert "Use pnpm." in (tmp_path / "memory" / "long_term" / "profile.md").read_text()
        storage.failing = True
        assert json.loads(await memory.handle_tool_call("forget_memory", {"id": "pm"})) == {"forgotten": "pm"}
        await memory.commit_run("forgotten")
        await memory.begin_run("again", new_session=True)
        # profile.md still holds the forgotten memory; the prompt shows what is saved.
        assert "Use pnpm." in (tmp_path / "memory" / "long_term" / "profile.md").read_text()
        assert memory.long_term_layer.endswith(
            "# PROFILE\n\nSynthesized from long-term memory (memories/); rebuilt automatically, do not edit.\n\n"
            "## Preferences\n- **CI**: Run the linters before pushing. (ci)"
        )

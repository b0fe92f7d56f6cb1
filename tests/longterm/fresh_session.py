"""Session 2 of the acceptance test, run in a NEW process: ``python fresh_session.py <root>``.

Opens the memory under ``<root>`` like a fresh agent process would, loads the
PROJECT MEMORY block and builds the first prompt with it; prints JSON with the
block, the system message and the block's token estimate.
"""

from __future__ import annotations

import json
import sys

import anyio

import aiden
from aiden.longterm.project import load_project_memory
from aiden.policy.tokens import estimate_tokens
from aiden.storage.layout import Layout


async def main(root: str) -> None:
    config = aiden.Config(durability="none")
    async with aiden.open_memory(root, config=config) as memory:
        block = await anyio.to_thread.run_sync(load_project_memory, Layout(root), config)
        await memory.begin_run("Add a lint step to the build.", now=10_000_000.0)
        built = await memory.build_messages(long_term=block)
    system = built.messages[0]["content"]
    print(json.dumps({"block": block, "system": system, "tokens": estimate_tokens(block), "pid": __import__("os").getpid()}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])

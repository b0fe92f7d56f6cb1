"""Session 2 of the acceptance test, run in a NEW process: ``python fresh_session.py <root>``.

Opens the memory under ``<root>`` like a fresh agent process would, starts session 2 and builds its
first prompt as an app does without ``long_term=``; prints JSON with the long-term layer the memory
publishes, the system message and the layer's token estimate.
"""

from __future__ import annotations

import json
import os
import sys

import anyio

import aiden
from aiden.policy.tokens import estimate_tokens


async def main(root: str) -> None:
    config = aiden.Config(durability="none")
    async with aiden.open_memory(root, config=config) as memory:
        await memory.begin_run("Add a lint step to the build.", now=10_000_000.0, new_session=True)
        block = str(memory.long_term_layer)
        built = await memory.build_messages()
    system = built.messages[0]["content"]
    print(json.dumps({"block": block, "system": system, "tokens": estimate_tokens(block), "pid": os.getpid()}))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])

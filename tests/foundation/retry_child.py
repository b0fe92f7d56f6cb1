"""Child process of test_retry_returns_stored: append the originals, compact, print what was stored as JSON.

python -m tests.foundation.retry_child ROOT COUNT
"""

from __future__ import annotations

import sys

import anyio
import msgspec

import aiden
from aiden.testing.conformance_retry import original
from tests.helpers import SMALL_MANUAL


async def main(root: str, count: int) -> None:
    async with aiden.open_memory(root, config=SMALL_MANUAL) as memory:
        stored = await memory.append_many(original(i) for i in range(count))
        outcome = await memory.maintain(manual=True)
        assert outcome.compacted, outcome
    sys.stdout.buffer.write(msgspec.json.encode(stored))


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], int(sys.argv[2]))

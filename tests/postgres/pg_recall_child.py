"""A child process of the recall cache tests (run with ``sys.executable``).

Usage::

    pg_recall_child.py ROOT DSN SESSION[,SESSION...]

Opens a memory of each session on ``ROOT`` (one host), appends and compacts a few events, recalls once
(so its recall cache exists and is open), prints ``ready`` and keeps them open until its stdin closes.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import anyio

from aiden import Config, Host, SessionEvent, open_host, open_memory

CONFIG = Config(hot_window_events=4, count_compress_after_events=6)


async def serve(root: str, dsn: str, session_id: str, host: Host, opened: anyio.Event, done: anyio.Event) -> None:
    """Open ``session_id``'s memory, recall once, and keep it open until ``done``."""
    async with open_memory(root, store=dsn, session_id=session_id, host=host, config=CONFIG) as memory:
        for j in range(8):
            await memory.append(SessionEvent(type="user_input", role="user", content=f"budget item {j}"))
        await memory.maintain(manual=True)
        assert await memory.recall_session_chunks("budget")
        opened.set()
        await done.wait()


async def main(root: str, dsn: str, session_ids: list[str]) -> None:
    """Serve every session until stdin closes."""
    done = anyio.Event()
    async with open_host() as host, anyio.create_task_group() as tg:
        opened = [anyio.Event() for _ in session_ids]
        for sid, event in zip(session_ids, opened, strict=True):
            tg.start_soon(serve, root, dsn, sid, host, event, done)
        for event in opened:
            await event.wait()
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)
        done.set()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3].split(","))

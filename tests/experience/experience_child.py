"""A child process for the experience kill storm: runs episodes and learning until killed.

    python experience_child.py ROOT SEED COUNT [CRASH_POINT]
    python experience_child.py serve     a fork server (tests.reliability.harness.ForkServer)

Most episodes fail one build command then fix it with another, some run one
command at the first try (tasks repeat, so later episodes confirm, supersede
or dispute earlier records); each observes a tool version (a fact record,
its value changing now and then); every few episodes it learns. ``begun <episode_id>`` is printed
(and flushed) when a run begins, ``committed <episode_id>`` only after ``commit_run`` returned, i.e.
once the episode is committed. With
``CRASH_POINT`` (a storage checkpoint name such as
``experience.records.after_files``) the process exits hard, without cleanup,
the second time it reaches that point.

``serve`` imports what a child's run needs once, then forks one child per
request (``tests.reliability.harness.serve_forever``): each forked child runs
:func:`run_child`, the very ``main`` above, in its own process (its pid is the one
the test SIGKILLs), without paying for an interpreter start and the imports.
"""

from __future__ import annotations

import json
import os
import random
import sys

import anyio

import aiden
from aiden.config import Config
from aiden.events import SessionEvent
from aiden.storage.fs import Storage

TASKS = ("build", "test", "deploy")
FLAGS = ("WITH_SSL=1", "TLS=1", "-j1")


async def shell(memory: aiden.Memory, call_id: str, cmd: str, output: str, code: int) -> None:
    await memory.append(
        SessionEvent(
            type="tool_call", tool_name="shell", tool_call_id=call_id, tool_args=json.dumps({"cmd": cmd})
        )
    )
    await memory.append(
        SessionEvent(type="tool_result", tool_call_id=call_id, content=output, meta={"exit_code": code})
    )


class CrashAt(Storage):
    """Exits the process (no cleanup, like SIGKILL) the second time ``point`` is reached."""

    def __init__(self, point: str | None) -> None:
        super().__init__()
        self.point = point
        self.hits = 0

    def checkpoint(self, name: str) -> None:
        if name == self.point:
            self.hits += 1
            if self.hits == 2:
                os._exit(137)


async def main(root: str, seed: int, count: int, point: str | None) -> None:
    rng = random.Random(seed)
    config = Config(idle_compact_after_minutes=0, session_summary_on_close=False)
    async with aiden.open_memory(root, config=config, storage=CrashAt(point)) as memory:
        for i in range(count):
            task = rng.choice(TASKS)
            await memory.begin_run(f"{task} the acme repo", environment="acme")
            episode_id = memory.episode_id
            print(f"begun {episode_id}", flush=True)
            memory.observe("make", rng.choice(("4.3", "4.4")))
            first_try = rng.random() < 0.3
            if not first_try:
                await shell(memory, "c1", f"make {task}", "error: missing flag", 2)
            flag = rng.choice(FLAGS)
            ok = rng.random() < 0.8
            await shell(
                memory, "c2", f"make {task} {flag}", "ok" if ok else "error: still failing", 0 if ok else 1
            )
            await memory.commit_run("done", outcome="success" if ok else "failure")
            print(f"committed {episode_id}", flush=True)
            if i % 3 == 2:
                outcome = await memory.learn_experience(limit=4)
                print(f"learned {outcome.episodes}", flush=True)


def run_child(argv: list[str]) -> int:
    """``ROOT SEED COUNT [CRASH_POINT]``, as on the command line."""
    anyio.run(main, argv[0], int(argv[1]), int(argv[2]), argv[3] if len(argv) > 3 else None)
    return 0


if __name__ == "__main__":
    if sys.argv[1:] == ["serve"]:
        from tests.reliability.child import preload
        from tests.reliability.harness import serve_forever

        preload()
        serve_forever(run_child)
    else:
        sys.exit(run_child(sys.argv[1:]))

"""Two Dream versions made through the public API, for the ``dream_restore`` tests of both backends."""

from __future__ import annotations

from aiden import Memory, SessionEvent

YARN = "Always use yarn, never npm."
PNPM = "Always use pnpm, never yarn."


async def dream_twice(memory: Memory) -> tuple[str, str]:
    """Two Dream versions through the public API: each preference compacted into history, then folded."""
    ids: list[str] = []
    for preference in (YARN, PNPM):
        said = [f"{preference} " + ("filler words " * 30 if i else "") for i in range(12)]
        await memory.append_many(SessionEvent(type="user_input", role="user", content=text) for text in said)
        assert (await memory.maintain(manual=True)).compacted
        dreamed = await memory.dream()
        assert dreamed.ran and dreamed.commit_id is not None
        ids.append(dreamed.commit_id)
    return ids[0], ids[1]

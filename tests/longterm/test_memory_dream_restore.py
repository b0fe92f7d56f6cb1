"""``memory.dream_restore(version)`` on the file backend: a Dream version back as a new version, under Dream's lock."""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import DreamError, Layout, VersionNotFoundError
from aiden.storage.fs import Storage
from aiden.storage.locks import SessionLock
from tests.helpers import SMALL_MANUAL
from tests.longterm.dream_versions import dream_twice

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.parametrize("anyio_backend", ["asyncio"]),
    pytest.mark.timeout(60),
]


def user_md(root: Path) -> str:
    return (Layout(root).long_term / "USER.md").read_text(encoding="utf-8")


async def test_dream_restore_brings_back_the_first_version_as_a_new_one(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        first, second = await dream_twice(memory)
        first_files = "# USER\n\n## Preferences\n- Always use yarn, never npm.\n"
        assert user_md(tmp_path) == "# USER\n\n## Preferences\n- Always use pnpm, never yarn.\n"

        restored = await memory.dream_restore(first)

        assert user_md(tmp_path) == first_files
        assert not (Layout(tmp_path).long_term / "SOUL.md").exists()
        assert not (Layout(tmp_path).long_term / "MEMORY.md").exists()
        log = await memory.dream_log()
        assert [v.commit_id for v in log[1:]] == [second, first]
        assert log[0] == restored
        assert restored.title == f"restore: {first[:12]} (dream: history 1: USER.md +1)"
        assert restored.commit_id not in (first, second)

        # Steps back, as `aiden restore` takes them: 1 is the version before the newest (the second Dream).
        again = await memory.dream_restore(1)
        assert again.title == f"restore: {second[:12]} (dream: history 2: USER.md +1 -1)"
        assert user_md(tmp_path) == "# USER\n\n## Preferences\n- Always use pnpm, never yarn.\n"
        assert [v.commit_id for v in await memory.dream_log()] == [
            again.commit_id,
            restored.commit_id,
            second,
            first,
        ]


async def test_an_unknown_version_raises_version_not_found_and_changes_nothing(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        with pytest.raises(VersionNotFoundError, match=r"^no version 'abcdef12'$"):
            await memory.dream_restore("abcdef12")  # no version at all yet
        await dream_twice(memory)
        before, log = user_md(tmp_path), await memory.dream_log()
        with pytest.raises(VersionNotFoundError, match=r"^no version 'abcdef12'$"):
            await memory.dream_restore("abcdef12")
        with pytest.raises(VersionNotFoundError, match=r"^there are only 2 versions$"):
            await memory.dream_restore(2)
        with pytest.raises(VersionNotFoundError, match=r"^not a commit id: 'zz'$"):
            await memory.dream_restore("zz")
        with pytest.raises(VersionNotFoundError, match=r"^not a commit id: True$"):
            await memory.dream_restore(True)
        assert (user_md(tmp_path), await memory.dream_log()) == (before, log)


async def test_dream_restore_is_refused_while_another_process_holds_the_dream_lock(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        first, _ = await dream_twice(memory)
        other = SessionLock(Storage(), Layout(tmp_path).dream_lock)  # another process's Dream, mid-run
        assert other.try_acquire()
        try:
            with pytest.raises(DreamError, match=r"\.dream\.lock is held\): restore refused$"):
                await memory.dream_restore(first)
        finally:
            other.release()
        assert len(await memory.dream_log()) == 2
        assert (await memory.dream_restore(first)).title.startswith(f"restore: {first[:12]} ")

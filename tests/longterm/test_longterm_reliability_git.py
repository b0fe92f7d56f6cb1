"""Reliability finding 1: a damaged ``long_term/.git`` is a CorruptionError, never a foreign crash.

Each test damages the repository one way (a ref pointing nowhere, flipped pack
bytes, a deleted ``objects/``) after a first Dream run created it.
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from functools import partial
from pathlib import Path

import anyio
import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.errors import AidenError, CorruptionError, DreamError, GitCorruptionError
from aiden.longterm.dream import Dream, run_dream_schedule
from aiden.longterm.history import HistoryStore
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

pytestmark = pytest.mark.anyio

NOW = 1_767_225_600.0


def bad_ref(git: Path) -> None:
    (git / "refs" / "heads" / "main").write_text("0" * 40 + "\n")


def flipped_bytes(git: Path) -> None:
    packs = sorted((git / "objects" / "pack").glob("*.pack"))
    assert packs  # dulwich stores Dream's commits as packs
    for pack in packs:
        data = bytearray(pack.read_bytes())
        data[len(data) // 2] ^= 0xFF
        pack.write_bytes(bytes(data))


def deleted_objects(git: Path) -> None:
    shutil.rmtree(git / "objects")


def symref_loop(git: Path) -> None:
    # dulwich's SymrefLoop derives from Exception only: it escaped a list of foreign types.
    (git / "HEAD").write_text("ref: HEAD\n")


def truncated_objects(git: Path) -> None:
    # A cut pack index makes dulwich raise struct.error, also missing from that list.
    for path in sorted((git / "objects").rglob("*")):
        if path.is_file():
            path.write_bytes(path.read_bytes()[:10])


DAMAGE: dict[str, Callable[[Path], None]] = {
    "bad_ref": bad_ref,
    "flipped_bytes": flipped_bytes,
    "deleted_objects": deleted_objects,
    "symref_loop": symref_loop,
    "truncated_objects": truncated_objects,
}


async def damaged(root: Path, how: str) -> tuple[Layout, Storage, HistoryStore]:
    """A memory root whose git history was created by one Dream run and then damaged ``how``."""
    layout = Layout(root)
    layout.session.mkdir(parents=True, exist_ok=True)
    storage = Storage()
    history = HistoryStore(layout, storage)
    history.append("Facts:\n- The staging database port is 5433.", session_key="cli:direct", now=NOW)
    first = await Dream(layout, storage, history).run(now=NOW + 1)
    assert first.ran and first.commit_id is not None
    DAMAGE[how](layout.long_term / ".git")
    # New material, so the next run must touch git (and meet the damage).
    history.append("Facts:\n- The staging host is db2.", session_key="cli:direct", now=NOW + 2)
    return layout, storage, history


@pytest.mark.parametrize("how", sorted(DAMAGE))
async def test_dream_and_dream_log_raise_corruption_error(tmp_path: Path, how: str) -> None:
    layout, storage, history = await damaged(tmp_path, how)
    dream = Dream(layout, storage, history)
    with pytest.raises(GitCorruptionError) as run_error:
        await dream.run(now=NOW + 10)
    assert isinstance(run_error.value, CorruptionError) and isinstance(run_error.value, DreamError)
    assert isinstance(run_error.value, AidenError)
    with pytest.raises(CorruptionError):
        await dream.dream_log()
    # A failed run leaves the cursor where it was (record 1 was consumed by the first run).
    assert history.dream_cursor() == 1
    assert history.cursor() == 2


@pytest.mark.parametrize("how", sorted(DAMAGE))
async def test_the_schedule_survives_a_damaged_repository(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    layout, storage, history = await damaged(tmp_path, how)
    dream = Dream(layout, storage, history)
    failures: list[type[BaseException]] = []
    send, receive = anyio.create_memory_object_stream[None](1)

    async def dream_once() -> None:
        try:
            await dream.run(now=NOW + 10)
        except BaseException as exc:
            failures.append(type(exc))
            raise
        finally:
            if len(failures) == 3:
                send.close()  # the schedule returns at its next wait

    with caplog.at_level(logging.ERROR, logger="aiden.longterm"):
        async with anyio.create_task_group() as tg:
            await tg.start(partial(run_dream_schedule, dream_once, 3600.0, requests=receive))
    assert failures == [GitCorruptionError, GitCorruptionError, GitCorruptionError]
    errors = [r.getMessage() for r in caplog.records if r.name == "aiden.longterm" and r.levelno == logging.ERROR]
    assert len(errors) == 3 and all(e.startswith("dream run failed: ") for e in errors)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("how", sorted(DAMAGE))
async def test_memory_with_dream_scheduled_works_over_a_damaged_repository(tmp_path: Path, how: str) -> None:
    await damaged(tmp_path, how)
    config = Config(durability="none", dream_interval_hours=1.0)
    for attempt in range(2):  # and again at the next open
        async with aiden.open_memory(tmp_path, config=config) as memory:
            assert await memory.request_dream()  # the scheduled task runs Dream now
            for _ in range(200):  # until that run met the damage (a real worker thread)
                await anyio.sleep(0.01)
                if await memory.request_dream():
                    break
            appended = await memory.append(SessionEvent(type="user_input", content=f"hello {attempt}"))
            assert appended.content == f"hello {attempt}"
            build = await memory.build_messages()
            assert build.messages[-1]["content"] == f"hello {attempt}"
            with pytest.raises(CorruptionError):
                await memory.dream()
            with pytest.raises(CorruptionError):
                await memory.dream_log()

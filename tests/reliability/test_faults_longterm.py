"""Issue #16: long-term memory's files are written through the runtime's :class:`Storage`, and a fault
on one of those writes is a clear error that loses nothing acknowledged.

Covered: a saved memory (``save_memory`` tool call: ``memories/<id>.md`` then ``index.yaml``), the
history record after a compaction (``history.jsonl`` then ``.cursor``), and the dated session summary
at rotation (``sessions/<stamp>-<id>.md``).

Known gap: Dream's versions live in ``long_term/.git``, written by dulwich with its own file I/O,
outside the seam. Nothing here runs Dream, and the walks below skip ``.git``.
"""

from __future__ import annotations

import json
import os
import random
import re
from pathlib import Path

import pytest

import aiden
from aiden import SessionEvent
from aiden.longterm.entries import parse_entry_md, parse_index_yaml
from aiden.storage.chunks import load_index
from aiden.storage.fs import TEMP_MARKER, is_temp_name
from aiden.storage.layout import Layout
from aiden.testing import ScriptedSummarizer
from tests.reliability.harness import read_root, reliability_config, tagged_event
from tests.reliability.test_faults_recall import SeamStorage, never

pytestmark = pytest.mark.anyio

CONFIG = reliability_config(lock_timeout_s=10)

PREFERENCE = "Always use yarn, never npm."


def save_args(title: str) -> dict[str, str]:
    return {"type": "preference", "title": title, "content": PREFERENCE}


def long_term_files(layout: Layout) -> list[str]:
    """Every file under long_term/ outside .git (dulwich's), relative, sorted."""
    out = []
    for dirpath, dirnames, filenames in os.walk(layout.long_term):
        if ".git" in dirnames:
            dirnames.remove(".git")
        out += [os.path.relpath(os.path.join(dirpath, f), layout.long_term) for f in filenames]
    return sorted(out)


def written_paths(calls: list[tuple[str, str]]) -> set[str]:
    """Paths a file's content reached through the seam: created (open), written, or renamed onto."""
    return {path for kind, path in calls if kind in ("open", "write", "replace", "rename")}


def indexed_ids(layout: Layout) -> list[str]:
    return [e.id for e in parse_index_yaml((layout.long_term / "index.yaml").read_bytes()).entries]


def saved_id(result: str) -> str:
    assert result.startswith('{"saved":{"id":"'), result
    return result.split('"')[5]


def assert_entries_whole(layout: Layout) -> None:
    """No temp file is visible under long_term/ and every memory file parses completely."""
    files = long_term_files(layout)
    assert [f for f in files if is_temp_name(f)] == []
    for name in files:
        if name.startswith("memories/"):
            parse_entry_md((layout.long_term / name).read_text(encoding="utf-8"))


def write_garbage_index(layout: Layout) -> None:
    (layout.long_term / "index.yaml").write_text("version: [")


async def append_and_compact(memory: aiden.Memory, prefix: str, rng: random.Random) -> list[SessionEvent]:
    acked = await memory.append_many([tagged_event(f"{prefix}:{i}", i, rng) for i in range(20)])
    outcome = await memory.maintain(manual=True)
    assert outcome.compacted
    return acked


async def assert_readable(memory: aiden.Memory, acked: list[SessionEvent]) -> None:
    for event in acked:
        got = await memory.read_event(event.seq)
        assert got is not None and got.content == event.content


def history_cursors(layout: Layout) -> list[int]:
    lines = (layout.long_term / "history.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["cursor"] for line in lines]


def history_chunk_ids(layout: Layout) -> list[str]:
    lines = (layout.long_term / "history.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line)["chunk_id"] for line in lines]


async def test_every_long_term_file_is_written_through_the_storage_passed_in(tmp_path: Path) -> None:
    storage = SeamStorage()
    layout = Layout(tmp_path)
    rng = random.Random(16)
    async with aiden.open_memory(tmp_path, config=CONFIG, storage=storage) as memory:
        storage.take()
        mem_id = saved_id(await memory.handle_tool_call("save_memory", save_args("yarn")))
        save = written_paths(storage.take())
        entry, index = layout.long_term / "memories" / f"{mem_id}.md", layout.long_term / "index.yaml"
        # The entry file, then the index, each replaced onto from a temp beside it.
        assert sorted(p for p in save if not is_temp_name(p)) == sorted(
            [str(layout.long_term / ".entries.lock"), str(entry), str(index)]
        )
        await memory.append_many([SessionEvent(type="user_input", role="user", content=PREFERENCE)])
        await append_and_compact(memory, "e", rng)
        compaction = written_paths(storage.take())
        for name in ("history.jsonl", ".cursor"):
            assert str(layout.long_term / name) in compaction
        await memory.rotate("closed-1")
        rotation = written_paths(storage.take())
        (summary,) = [f for f in long_term_files(layout) if f.startswith("sessions/")]
        assert str(layout.long_term / summary) in rotation
        seen = save | compaction | rotation
    # profile.md is rebuilt on a debounce or at the next open: reopen, through the same seam.
    async with aiden.open_memory(tmp_path, config=CONFIG, storage=storage) as memory:
        assert "**yarn**" in memory.long_term_layer
    seen |= written_paths(storage.take())
    # Every file long-term memory holds (locks included) was created or written through the seam.
    assert [f for f in long_term_files(layout) if str(layout.long_term / f) not in seen] == []
    assert {f.split("/")[0] for f in long_term_files(layout)} == {
        ".cursor",
        ".entries.lock",
        ".history.lock",
        ".summaries.lock",
        "history.jsonl",
        "index.yaml",
        "memories",
        "profile.md",
        "sessions",
    }


async def test_fault_replacing_the_index_fails_the_save_and_keeps_the_store_consistent(
    tmp_path: Path,
) -> None:
    storage = SeamStorage()
    layout = Layout(tmp_path)
    rng = random.Random(17)
    index = str(layout.long_term / "index.yaml")
    async with aiden.open_memory(
        tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()
    ) as memory:
        acked = await append_and_compact(memory, "e", rng)
        kept = saved_id(await memory.handle_tool_call("save_memory", save_args("kept")))
        storage.fail = lambda kind, path: (kind, path) == ("replace", index)
        result = await memory.handle_tool_call("save_memory", save_args("lost"))
        assert result == f'{{"error":"save_memory: replace {index} failed: Input/output error"}}'
        assert storage.injected == 1
        assert indexed_ids(layout) == [kept]
        await assert_readable(memory, acked)
        storage.fail = never
        after = saved_id(await memory.handle_tool_call("save_memory", save_args("after")))
        assert indexed_ids(layout) == [kept, after]
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        assert memory.recovery.unrecoverable == []
        await assert_readable(memory, acked)
        layer = memory.long_term_layer
        assert ("**kept**" in layer, "**after**" in layer, "**lost**" in layer) == (True, True, False)
    assert indexed_ids(layout) == [kept, after]
    assert_entries_whole(layout)


async def test_a_failed_save_is_never_adopted_by_an_index_rebuild(tmp_path: Path) -> None:
    storage = SeamStorage()
    layout = Layout(tmp_path)
    index = str(layout.long_term / "index.yaml")
    async with aiden.open_memory(
        tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()
    ) as memory:
        saved_id(await memory.handle_tool_call("save_memory", save_args("kept")))
        storage.fail = lambda kind, path: (kind, path) == ("replace", index)
        assert (await memory.handle_tool_call("save_memory", save_args("lost"))).startswith('{"error":')
    write_garbage_index(layout)
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        layer = memory.long_term_layer
    assert ("**kept**" in layer, "**lost**" in layer) == (True, False)


async def test_fault_syncing_the_entry_fails_the_save_and_leaves_no_temp(tmp_path: Path) -> None:
    storage = SeamStorage()
    layout = Layout(tmp_path)
    memories = str(layout.long_term / "memories") + os.sep
    async with aiden.open_memory(
        tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()
    ) as memory:
        kept = saved_id(await memory.handle_tool_call("save_memory", save_args("kept")))
        storage.fail = lambda kind, path: kind == "fsync" and path.startswith(memories)
        result = await memory.handle_tool_call("save_memory", save_args("lost"))
        assert result.startswith(f'{{"error":"save_memory: fsync {memories}.aiden-tmp-')
        assert result.endswith(' failed: Input/output error"}')
        assert storage.injected == 1
        # The temp was discarded through the seam; nothing reached the index.
        assert_entries_whole(layout)
        assert sorted(os.listdir(memories)) == [f"{kept}.md"]
        assert indexed_ids(layout) == [kept]


@pytest.mark.parametrize(("kind", "name"), [("write", "history.jsonl"), ("replace", ".cursor")])
async def test_fault_recording_history_after_a_compaction_keeps_the_compaction(
    tmp_path: Path, kind: str, name: str
) -> None:
    storage = SeamStorage()
    layout = Layout(tmp_path)
    rng = random.Random(18)
    target = str(layout.long_term / name)
    async with aiden.open_memory(
        tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()
    ) as memory:
        storage.fail = lambda k, path: (k, path) == (kind, target)
        # The hook's failure is logged; the compaction it follows is committed and acknowledged.
        acked = await append_and_compact(memory, "e", rng)
        assert storage.injected == 1
        storage.fail = never
        acked += await append_and_compact(memory, "f", rng)
        await assert_readable(memory, acked)
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        acked += await append_and_compact(memory, "g", rng)
        await assert_readable(memory, acked)
    # The failed record was retried by the next compaction, before its own: a failed append is
    # written then, a record whose cursor update failed is found by its chunk id and not written
    # twice. Every compaction has exactly one record, in order.
    assert history_cursors(layout) == [1, 2, 3]
    assert (layout.long_term / ".cursor").read_text() == "3\n"
    assert len(set(history_chunk_ids(layout))) == 3
    assert_entries_whole(layout)


async def test_a_record_the_close_cut_is_written_at_the_next_open_once(tmp_path: Path) -> None:
    """The last compaction before a close (or a crash) has no later compaction to retry its record."""
    storage = SeamStorage()
    layout = Layout(tmp_path)
    rng = random.Random(19)
    target = str(layout.long_term / "history.jsonl")
    async with aiden.open_memory(
        tmp_path, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()
    ) as memory:
        acked = await append_and_compact(memory, "e", rng)
        storage.fail = lambda k, path: (k, path) == ("write", target)
        acked += await append_and_compact(memory, "f", rng)
        assert storage.injected == 1
    index = load_index(layout)
    assert index is not None
    chunks = [c.chunk_id for c in index.chunks]
    assert len(chunks) == 2 and history_chunk_ids(layout) == chunks[:1]
    for _ in range(2):  # the second open finds every record and writes none
        async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
            await assert_readable(memory, acked)
            # Answered after the open's replay of the newest chunks' hook (the pass loop runs it first).
            assert not (await memory.maintain()).compacted
        assert history_chunk_ids(layout) == chunks
        assert history_cursors(layout) == [1, 2]


async def test_fault_writing_the_session_summary_at_rotation_keeps_the_session(tmp_path: Path) -> None:
    storage = SeamStorage()
    layout = Layout(tmp_path)
    rng = random.Random(19)
    sessions = str(layout.long_term / "sessions") + os.sep
    async with aiden.open_memory(tmp_path, config=CONFIG, storage=storage) as memory:
        acked = await memory.append_many([SessionEvent(type="user_input", role="user", content=PREFERENCE)])
        acked += await append_and_compact(memory, "e", rng)
        storage.fail = lambda kind, path: kind == "replace" and path.startswith(sessions)
        # The summary's failure is logged; the rotation goes on and archives the whole session.
        assert await memory.rotate("closed-1") == "closed-1"
        assert storage.injected == 1
        storage.fail = never
        assert os.listdir(sessions) == []
    (archived, active) = read_root(tmp_path)
    assert (archived.name, archived.problems, active.problems) == ("archive/closed-1", [], [])
    assert sorted(e.seq for e in archived.events) == sorted(e.seq for e in acked)
    # The knowledge the summary would have carried is still in the archived running summary.
    running = (layout.archived_session("closed-1") / "running_summary.md").read_text(encoding="utf-8")
    assert PREFERENCE in running
    async with aiden.open_memory(tmp_path, config=CONFIG) as memory:
        assert memory.recovery.unrecoverable == []
        assert memory.recovery.temp_files_removed == 0
    assert_entries_whole(layout)


Shape = tuple[str, str, str]


def shape(root: Path, kind: str, path: str) -> Shape:
    """A storage call with the run-specific parts (root, temp suffix, memory id) taken out."""
    folder, name = os.path.split(os.path.relpath(path, root))
    if is_temp_name(name):
        name = "<tmp>" + name[len(TEMP_MARKER) :].rsplit(".", 2)[0]
    if folder.endswith("memories"):
        name = re.sub(r"mem-[0-9]+-[0-9a-f]+", "<id>", name)
    return kind, folder, name


async def recorded_save(root: Path) -> list[Shape]:
    storage = SeamStorage()
    async with aiden.open_memory(
        root, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()
    ) as memory:
        storage.take()
        saved_id(await memory.handle_tool_call("save_memory", save_args("first")))
        return [shape(root, kind, path) for kind, path in storage.take()]


async def test_a_fault_at_each_storage_call_of_a_save(tmp_path: Path) -> None:
    calls = await recorded_save(tmp_path / "recorded")
    assert calls[-1] == ("fsync_dir", "memory", "long_term")  # the directory fsync after index.yaml
    assert ("replace", "memory/long_term/memories", "<id>.md") in calls
    adopted: list[Shape] = []
    for i, target in enumerate(calls):
        root = tmp_path / f"case{i}"
        layout = Layout(root)
        nth = calls[: i + 1].count(target)
        matched = 0

        def fail(kind: str, path: str, target: Shape = target, nth: int = nth, root: Path = root) -> bool:
            nonlocal matched
            if shape(root, kind, path) != target:
                return False
            matched += 1
            return matched == nth

        storage = SeamStorage()
        async with aiden.open_memory(
            root, config=CONFIG, storage=storage, summarizer=ScriptedSummarizer()
        ) as memory:
            storage.fail = fail
            result = await memory.handle_tool_call("save_memory", save_args("first"))
            assert (storage.injected, result.startswith('{"error":"save_memory: ')) == (1, True), (
                target,
                result,
            )
            storage.fail = never
            saved_id(await memory.handle_tool_call("save_memory", save_args("second")))
        async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
            assert memory.recovery.unrecoverable == []
            layer = memory.long_term_layer
        assert "**second**" in layer, target
        if "**first**" in layer:
            adopted.append(target)
        assert_entries_whole(layout)
        assert len(indexed_ids(layout)) == (2 if "**first**" in layer else 1)
    # Not even a fault after index.yaml was replaced (the directory fsync) leaves the failed save
    # visible: the caller was told it failed, so the old index and entry files are put back.
    assert adopted == []

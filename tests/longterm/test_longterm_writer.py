"""Both death-point writers, the checkpoint, atomic writes and the crash-safe cap."""

from __future__ import annotations

import os
from pathlib import Path

import msgspec
import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.errors import SummarizerError
from aiden.longterm.files import digest_path, list_session_files, running_summary_path
from aiden.longterm.summaries import SessionSummary, parse_summary_md
from aiden.longterm.writer import FileSummaryRows, SessionSummaryWriter
from aiden.storage.fs import TEMP_MARKER, Storage
from aiden.storage.layout import Layout
from aiden.summarizers.extractive.summarizer import ExtractiveSummarizer
from aiden.testing import FailingSummarizer, RecordingStorage

pytestmark = pytest.mark.anyio

CFG = Config(durability="none")


def turn(seq: int, user: str, assistant: str) -> list[SessionEvent]:
    return [
        SessionEvent(type="user_input", role="user", content=user, seq=seq, timestamp=1000.0 + seq),
        SessionEvent(type="assistant_output", role="assistant", content=assistant, seq=seq + 1,
                     timestamp=1000.5 + seq),
    ]


REGION_1 = [
    *turn(1, "Let's set up the frontend build.", "Sure."),
    *turn(3, "Always use yarn, never npm.", "Noted, I will keep that in mind."),
]
REGION_2 = [
    *turn(5, "Now fix the loader.", "Approach X breaks the build because the loader order changes."),
    *turn(7, "Note that the staging database port is 5433.", "Understood."),
]


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


async def test_pre_compaction_merge_preserves_earlier_content_and_is_idempotent(
    layout: Layout, storage: Storage
) -> None:
    writer = SessionSummaryWriter(layout, storage, ExtractiveSummarizer(), CFG)
    first = await writer.merge_running_summary(REGION_1, now=2000.0)
    assert first.user_preferences == ("Always use yarn, never npm.",)
    assert first.through_seq == 4
    second = await writer.merge_running_summary(REGION_2, now=2100.0)
    assert second.user_preferences == ("Always use yarn, never npm.",)
    assert second.failed_approaches == ("Approach X breaks the build because the loader order changes.",)
    assert second.facts == ("Note that the staging database port is 5433.",)
    assert second.session_id == first.session_id and second.created_at == 2000
    on_disk = parse_summary_md(read(running_summary_path(layout)))
    assert on_disk == second
    again = await writer.merge_running_summary([*REGION_1, *REGION_2], now=2200.0)  # a retried compaction
    assert again == second


async def test_writes_are_atomic(layout: Layout) -> None:
    storage = RecordingStorage()
    writer = SessionSummaryWriter(layout, storage, ExtractiveSummarizer(), CFG)
    await writer.merge_running_summary(REGION_1, now=2000.0)
    # The inter-process summaries lock file is created once (never replaced); it is not the write.
    ops = [(op.kind, Path(op.target or op.path).name) for op in storage.ops]
    ops = [(kind, name) for kind, name in ops if name not in (".summaries.lock", "long_term", "memory")]
    temp = next(name for kind, name in ops if kind == "create")
    assert temp.startswith(TEMP_MARKER + "running_summary.md")
    assert ops == [
        ("create", temp),
        ("write", temp),
        ("fsync", temp),
        ("replace", "running_summary.md"),
        ("fsync_dir", "session"),
    ]
    assert [n for n in os.listdir(layout.session) if TEMP_MARKER in n] == []


async def test_failing_summarizer_falls_back_or_raises_without_writing(layout: Layout, storage: Storage) -> None:
    degraded = SessionSummaryWriter(layout, storage, FailingSummarizer(), CFG)
    result = await degraded.write_session_summary(REGION_1, now=3000.0)
    assert result.degraded
    assert result.summary.user_preferences == ("Always use yarn, never npm.",)
    strict_root = Layout(layout.root / "strict")
    strict_root.session.mkdir(parents=True)
    strict = SessionSummaryWriter(strict_root, storage, FailingSummarizer(SummarizerError("down")), CFG,
                                  use_fallback=False)
    with pytest.raises(SummarizerError, match="down"):
        await strict.merge_running_summary(REGION_1, now=3000.0)
    assert not running_summary_path(strict_root).exists()


async def test_session_end_writes_dated_file_and_checkpoint_rewrites_it(layout: Layout, storage: Storage) -> None:
    writer = SessionSummaryWriter(layout, storage, ExtractiveSummarizer(), CFG)
    await writer.merge_running_summary(REGION_1, now=1_767_323_045.0)  # 2026-01-02T03:04:05Z
    check = await writer.checkpoint(REGION_2[:2], now=1_767_323_100.0)
    assert check.reason == "checkpoint" and check.path is not None
    session_id = parse_summary_md(read(running_summary_path(layout))).session_id
    assert Path(check.path).name == f"20260102T030500Z-{session_id}.md"  # when written, not when the running summary began
    final = await writer.write_session_summary(REGION_2, now=1_767_323_200.0, reason="rotation")
    assert final.path == check.path
    assert [p.name for p in list_session_files(layout)] == [Path(check.path).name]
    stored = parse_summary_md(read(Path(check.path)))
    assert stored == final.summary
    assert stored.kind == "session" and stored.created_at == 1_767_323_200
    assert stored.user_preferences == ("Always use yarn, never npm.",)
    assert stored.facts == ("Note that the staging database port is 5433.",)
    nothing = SessionSummaryWriter(Layout(layout.root / "empty"), storage, ExtractiveSummarizer(), CFG)
    empty = await nothing.write_session_summary(turn(1, "Hi there!", "Hello! How can I help you today?"), now=1.0)
    assert empty.path is None


class RotatedMidWrite(Storage):
    """Another process's rotation lands between the session-dir check and the running summary's write."""

    def __init__(self, layout: Layout) -> None:
        super().__init__()
        self.layout = layout
        self.armed = False

    def _fault(self, kind: str, path: str) -> None:
        if self.armed and kind == "open" and Path(path).parent == self.layout.session:
            self.armed = False
            self.layout.archive.mkdir()
            os.rename(self.layout.session, self.layout.archived_session("s-old"))


async def test_checkpoint_beside_a_rotation_writes_the_session_file_and_recreates_no_session_dir(
    layout: Layout,
) -> None:
    storage = RotatedMidWrite(layout)
    writer = SessionSummaryWriter(layout, storage, ExtractiveSummarizer(), CFG)
    await writer.merge_running_summary(REGION_1, now=1_767_323_045.0)
    storage.armed = True
    check = await writer.checkpoint(REGION_2, now=1_767_323_100.0)
    assert storage.armed is False and check.path is not None
    assert parse_summary_md(read(Path(check.path))).facts == ("Note that the staging database port is 5433.",)
    assert not layout.session.exists()  # the rotation's own mkdir starts the next session
    archived = parse_summary_md(read(layout.archived_session("s-old") / "running_summary.md"))
    assert archived.through_seq == 4  # as merged before the rotation: the checkpoint's write was skipped


async def test_a_session_end_never_writes_the_running_summary_into_the_next_session(
    layout: Layout, storage: Storage
) -> None:
    """Another process rotated (archive + new session/) between the read and the write."""
    writer = SessionSummaryWriter(layout, storage, ExtractiveSummarizer(), CFG)
    await writer.merge_running_summary(REGION_1, now=1_767_323_045.0)
    rows = FileSummaryRows(layout, storage, keep=CFG.session_summaries_keep)
    running = rows.read_running()
    assert running is not None
    layout.archive.mkdir()
    os.rename(layout.session, layout.archived_session("s-old"))
    layout.session.mkdir()
    final = msgspec.structs.replace(running, kind="session")
    path = rows.write_session(running, final)
    assert parse_summary_md(read(Path(path))).session_id == running.session_id
    assert not running_summary_path(layout).exists()  # the next session starts without it
    archived = parse_summary_md(read(layout.archived_session("s-old") / "running_summary.md"))
    assert archived == running


class CrashAfterDigest(Storage):
    def __init__(self) -> None:
        super().__init__()
        self.armed = True

    def checkpoint(self, name: str) -> None:
        if self.armed and name == "digest.after_write":
            self.armed = False
            raise OSError("simulated crash after the digest write")


async def test_cap_merges_oldest_into_digest_and_survives_a_crash(layout: Layout) -> None:
    storage = CrashAfterDigest()
    config = Config(durability="none", session_summaries_keep=3)
    for i in range(1, 4):
        writer = SessionSummaryWriter(layout, storage, ExtractiveSummarizer(), config)
        await writer.write_session_summary(
            turn(1, "Work on module.", f"Note that service{i} port is {5000 + i}."), now=1_767_000_000.0 + i * 100
        )
        running_summary_path(layout).unlink()  # the next session starts fresh (rotation does this)
    assert len(list_session_files(layout)) == 3 and not digest_path(layout).exists()
    writer = SessionSummaryWriter(layout, storage, ExtractiveSummarizer(), config)
    with pytest.raises(OSError, match="simulated crash"):
        await writer.write_session_summary(turn(1, "Work.", "Note that service4 port is 5004."), now=1_767_000_400.0)
    names = [p.stem for p in list_session_files(layout)]
    assert len(names) == 4  # the crash left the merged original behind
    digest_after_crash = read(digest_path(layout))
    digest = parse_summary_md(digest_after_crash)
    assert digest.kind == "digest" and digest.through == names[0]
    assert digest.facts == ("Note that service1 port is 5001.",)
    running_summary_path(layout).unlink()
    writer = SessionSummaryWriter(layout, storage, ExtractiveSummarizer(), config)
    result = await writer.write_session_summary(turn(1, "Work.", "Note that service5 port is 5005."),
                                                now=1_767_000_500.0)
    assert result.cap.deleted == (names[0], names[1]) and result.cap.merged == (names[1],)
    final = parse_summary_md(read(digest_path(layout)))
    assert final.facts == ("Note that service1 port is 5001.", "Note that service2 port is 5002.")
    assert len(list_session_files(layout)) == 3


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_forced_compaction_keeps_knowledge_and_rotation_archives_running_summary(tmp_path: Path) -> None:
    # Nothing compacts by itself (the test plays the scheduler's pre-compaction hook); manual maintain does.
    config = Config(durability="none", keep_recent_tokens=60, hot_window_events=4, count_compress_after_events=1000)
    storage = Storage()
    layout = Layout(tmp_path)
    async with aiden.open_memory(tmp_path, config=config, storage=storage) as memory:
        writer = SessionSummaryWriter(layout, storage, ExtractiveSummarizer(), config)
        await memory.begin_run("Set up the frontend build.", now=1000.0)
        await memory.commit_run("Sure.", now=1001.0)
        await memory.begin_run("Always use yarn, never npm.", now=1002.0)
        await memory.commit_run("Approach X breaks the build because the loader order changes.", now=1003.0)
        for i in range(6):
            await memory.begin_run(f"Step {i} of the build.", now=1004.0 + 2 * i)
            await memory.commit_run(f"Step {i} done.", now=1005.0 + 2 * i)
        # The pre-compaction hook (wired by the runtime): merge the region, then compact.
        await writer.merge_running_summary(await memory.hot_window(), now=1100.0)
        outcome = await memory.maintain(manual=True)
        hot = await memory.hot_window()
        archived = await memory.rotate("closed-1")
    assert outcome.compacted
    assert "Always use yarn, never npm." not in [e.content for e in hot]
    kept = parse_summary_md(read(layout.archived_session(archived) / "running_summary.md"))
    assert kept.user_preferences == ("Always use yarn, never npm.",)
    assert kept.failed_approaches == ("Approach X breaks the build because the loader order changes.",)


def test_hostile_files_in_the_store_are_ignored(layout: Layout, tmp_path: Path) -> None:
    from aiden.longterm.files import MAX_SUMMARY_BYTES, read_summary
    from aiden.longterm.project import load_project_memory

    sessions = layout.long_term / "sessions"
    sessions.mkdir(parents=True)
    secret = tmp_path / "secret.md"
    secret.write_text("## USER PREFERENCES\n- leaked secret\n", encoding="utf-8")
    (sessions / "20260101T000000Z-link.md").symlink_to(secret)
    (sessions / "../../escape.md").write_text("## USER PREFERENCES\n- escaped\n", encoding="utf-8")
    (sessions / "not-a-summary.md").write_text("## USER PREFERENCES\n- ignored\n", encoding="utf-8")
    huge = sessions / "20260102T000000Z-huge.md"
    huge.write_text("## PROJECT FACTS\n- " + "x" * (2 * MAX_SUMMARY_BYTES) + "\n- never reached\n", encoding="utf-8")
    assert [p.name for p in list_session_files(layout)] == ["20260102T000000Z-huge.md"]
    parsed = read_summary(huge)
    assert parsed is not None and len(parsed.facts) == 1 and len(parsed.facts[0]) == 600
    block = load_project_memory(layout, Config(project_memory_tokens=300))
    assert "leaked secret" not in block and "escaped" not in block and "ignored" not in block
    assert block.startswith("PROJECT MEMORY") and "never reached" not in block


class HangingSummarizer:
    """Never answers: only a deadline ends its call."""

    async def summarize(self, request: object) -> object:
        import anyio

        await anyio.sleep_forever()
        raise AssertionError("unreachable")


async def test_the_extractive_fallback_has_a_deadline_too(layout: Layout, storage: Storage) -> None:
    writer = SessionSummaryWriter(layout, storage, HangingSummarizer(), CFG)  # type: ignore[arg-type]
    # A deadline already spent (a close whose budget is used up): both the summarizer and the
    # fallback are cut at their first checkpoint; the caller gets an empty, degraded summary.
    found, degraded = await writer.extract(REGION_1 + REGION_2, summarizer_timeout_s=0)
    assert (found, degraded) == (SessionSummary(), True)
    found, degraded = await writer.extract(REGION_1 + REGION_2, summarizer_timeout_s=2)
    assert degraded is True
    assert found.user_preferences == ("Always use yarn, never npm.",)

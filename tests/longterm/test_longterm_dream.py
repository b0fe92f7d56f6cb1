"""Dream: focused edits, git versions (dulwich), failed runs change nothing, restore."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from aiden.errors import SummarizerError, VersionNotFoundError
from aiden.longterm.dream import Dream, SummarizerDreamEditor
from aiden.longterm.dream_edits import DreamEdit, apply_edits, plan_edits
from aiden.longterm.history import HistoryRecord, HistoryStore
from aiden.longterm.summaries import SessionSummary
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout
from aiden.summarizers.protocol import SummaryResult
from aiden.testing import FailingSummarizer, ScriptedSummarizer

pytestmark = pytest.mark.anyio

NOW = 1_767_225_600.0


def files_of(layout: Layout) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for name in ("SOUL.md", "USER.md", "MEMORY.md"):
        path = layout.long_term / name
        out[name] = path.read_text(encoding="utf-8") if path.exists() else None
    return out


def test_plan_and_apply_focused_edits() -> None:
    learned = SessionSummary(
        user_preferences=("Use npm for this project.", "Please answer concisely."),
        facts=("The API port is 8080.",),
        failed_approaches=("Approach X breaks the build.",),
        outcome=("Shipped.",),
    )
    files = {"USER.md": "# USER\n\n## Preferences\n- Always use yarn, never npm.\n- Prefer small commits.\n",
             "MEMORY.md": "# MEMORY\n\n## Project Facts\n- The API port is 8080.\n"}
    edits = plan_edits(learned, files)
    assert edits == [
        DreamEdit(file="USER.md", section="Preferences", action="remove", text="Always use yarn, never npm."),
        DreamEdit(file="USER.md", section="Preferences", action="add", text="Use npm for this project."),
        DreamEdit(file="SOUL.md", section="Communication Style", action="add", text="Please answer concisely."),
        DreamEdit(file="MEMORY.md", section="Failed Approaches", action="add", text="Approach X breaks the build."),
    ]
    applied = apply_edits(files, edits)
    assert applied == {
        "SOUL.md": "# SOUL\n\n## Communication Style\n- Please answer concisely.\n",
        "USER.md": "# USER\n\n## Preferences\n- Prefer small commits.\n- Use npm for this project.\n",
        "MEMORY.md": "# MEMORY\n\n## Project Facts\n- The API port is 8080.\n\n## Failed Approaches\n"
                     "- Approach X breaks the build.\n",
    }
    assert plan_edits(learned, applied) == []  # nothing new: no edits


def seed_history(history: HistoryStore, *contents: str) -> None:
    for text in contents:
        history.append(text, session_key="cli:direct", now=NOW)


async def test_dream_edits_files_commits_and_advances_the_cursor(layout: Layout, storage: Storage) -> None:
    history = HistoryStore(layout, storage)
    seed_history(
        history,
        "Constraints:\n- Always use yarn, never npm.\nFailed approaches:\n- Approach X breaks the build because "
        "the loader order changes.",
        "Facts:\n- The staging database port is 5433.\n- Note that replies should be concise.",
    )
    dream = Dream(layout, storage, history)
    outcome = await dream.run(now=NOW + 100)
    assert outcome.ran and outcome.records == 2 and outcome.cursor == 2
    assert history.dream_cursor() == 2
    files = files_of(layout)
    assert files["USER.md"] == "# USER\n\n## Preferences\n- Always use yarn, never npm.\n"
    assert files["MEMORY.md"] == (
        "# MEMORY\n\n## Project Facts\n- The staging database port is 5433.\n- Note that replies should be concise."
        "\n\n## Failed Approaches\n- Approach X breaks the build because the loader order changes.\n"
    )
    assert files["SOUL.md"] is None
    log = await dream.dream_log()
    assert [v.title for v in log] == ["dream: history 1-2: USER.md +1, MEMORY.md +3"]
    assert log[0].commit_id == outcome.commit_id and log[0].timestamp == int(NOW + 100)
    assert "+ USER.md / Preferences: Always use yarn, never npm." in log[0].message
    again = await dream.run(now=NOW + 200)
    assert not again.ran and len(await dream.dream_log()) == 1


async def test_a_failed_dream_leaves_cursor_and_files_unchanged(layout: Layout, storage: Storage) -> None:
    history = HistoryStore(layout, storage)
    seed_history(history, "Constraints:\n- Always use yarn, never npm.")
    dream = Dream(layout, storage, history)
    await dream.run(now=NOW)
    seed_history(history, "Constraints:\n- Use npm for this project.")
    before = files_of(layout)
    failing = Dream(layout, storage, history,
                    editor=SummarizerDreamEditor(FailingSummarizer(SummarizerError("provider down"))))
    with pytest.raises(SummarizerError, match="provider down"):
        await failing.run(now=NOW + 10)
    assert history.dream_cursor() == 1
    assert files_of(layout) == before
    assert len(await dream.dream_log()) == 1
    done = await dream.run(now=NOW + 20)  # the next healthy run picks up the same records
    assert done.cursor == 2
    assert files_of(layout)["USER.md"] == "# USER\n\n## Preferences\n- Use npm for this project.\n"
    assert (await dream.dream_log())[0].title == "dream: history 2: USER.md +1 -1"


async def test_restore_brings_back_the_previous_version_and_is_committed(layout: Layout, storage: Storage) -> None:
    history = HistoryStore(layout, storage)
    dream = Dream(layout, storage, history)
    seed_history(history, "Constraints:\n- Always use yarn, never npm.")
    await dream.run(now=NOW)
    v1 = files_of(layout)
    seed_history(history, "Constraints:\n- Use npm for this project.")
    await dream.run(now=NOW + 10)
    assert files_of(layout) != v1
    restored = await dream.restore(1, now=NOW + 20)
    assert files_of(layout) == v1
    log = await dream.dream_log()
    first_id = log[2].commit_id
    assert [v.title for v in log] == [
        f"restore: {first_id[:12]} (dream: history 1: USER.md +1)",
        "dream: history 2: USER.md +1 -1",
        "dream: history 1: USER.md +1",
    ]
    assert restored.commit_id == log[0].commit_id
    await dream.restore(log[1].commit_id[:8], now=NOW + 30)  # forward again, by id prefix
    assert files_of(layout)["USER.md"] == "# USER\n\n## Preferences\n- Use npm for this project.\n"
    for bad in (99, -1, "zz", "abc", "0000000"):
        with pytest.raises(VersionNotFoundError):
            await dream.restore(bad, now=NOW + 40)


async def test_restore_to_the_files_already_current_answers_that_version_as_it_is(
    layout: Layout, storage: Storage
) -> None:
    history = HistoryStore(layout, storage)
    dream = Dream(layout, storage, history)
    seed_history(history, "Constraints:\n- Always use yarn, never npm.")
    await dream.run(now=NOW)
    seed_history(history, "Constraints:\n- Use npm for this project.")
    await dream.run(now=NOW + 10)
    await dream.restore(1, now=NOW + 20)
    log = await dream.dream_log()
    # The newest version itself (0), and the version it restored (its files are the newest's).
    for target, version in ((0, log[0]), (log[2].commit_id, log[2])):
        assert await dream.restore(target, now=NOW + 30) == version
        assert await dream.dream_log() == log


async def test_hand_edits_are_snapshotted_before_dream_changes_files(layout: Layout, storage: Storage) -> None:
    layout.long_term.mkdir(parents=True)
    (layout.long_term / "MEMORY.md").write_text("# MEMORY\n\nHand-written notes.\n", encoding="utf-8")
    history = HistoryStore(layout, storage)
    dream = Dream(layout, storage, history)
    seed_history(history, "Facts:\n- The API port is 8080.")
    await dream.run(now=NOW)
    (layout.long_term / "USER.md").write_text("# USER\n\n## Preferences\n- Dark mode.\n", encoding="utf-8")
    seed_history(history, "Facts:\n- The docs are built with mkdocs.")
    await dream.run(now=NOW + 10)
    titles = [v.title for v in await dream.dream_log()]
    assert titles == [
        "dream: history 2: MEMORY.md +1",
        "snapshot: manual edits",
        "dream: history 1: MEMORY.md +1",
        "snapshot: long-term files before the first Dream",
    ]
    assert files_of(layout)["MEMORY.md"] == (
        "# MEMORY\n\nHand-written notes.\n\n## Project Facts\n- The API port is 8080.\n"
        "- The docs are built with mkdocs.\n"
    )


class RecordingEditor:
    """A typed fake editor: records what Dream showed it."""

    def __init__(self) -> None:
        self.seen: list[tuple[list[int], dict[str, str]]] = []

    async def propose(self, records: Sequence[HistoryRecord], files: Mapping[str, str]) -> list[DreamEdit]:
        self.seen.append(([r.cursor for r in records], dict(files)))
        return []


async def test_llm_path_and_batching(layout: Layout, storage: Storage) -> None:
    history = HistoryStore(layout, storage)
    seed_history(history, "a", "b", "c")
    editor = RecordingEditor()
    dream = Dream(layout, storage, history, editor=editor, max_records=2)
    first = await dream.run(now=NOW)
    assert first.cursor == 2 and first.commit_id is None and first.message == "dream: history 1-2: no changes"
    await dream.run(now=NOW + 1)
    assert [cursors for cursors, _ in editor.seen] == [[1, 2], [3]]
    assert editor.seen[0][1] == {"SOUL.md": "", "USER.md": "", "MEMORY.md": ""}
    seed_history(history, "raw model-facing history")
    scripted = ScriptedSummarizer([SummaryResult(text="## USER PREFERENCES\n- Reply in English, briefly.\n")])
    llm = Dream(layout, storage, history, editor=SummarizerDreamEditor(scripted))
    out = await llm.run(now=NOW + 2)
    assert scripted.requests[0].purpose == "session_summary"
    assert [e.content for e in scripted.requests[0].events] == ["raw model-facing history"]
    assert out.edits == (DreamEdit(file="SOUL.md", section="Communication Style", action="add",
                                   text="Reply in English, briefly."),)
    assert files_of(layout)["SOUL.md"] == "# SOUL\n\n## Communication Style\n- Reply in English, briefly.\n"

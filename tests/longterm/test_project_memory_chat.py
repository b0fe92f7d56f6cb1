"""What the PROJECT MEMORY block carries from a chat's earlier sessions.

In a multi-party chat every turn reads "Name: ...". The speaker is who said it, not a subject whose
value the line sets ("Database: Postgres"), so a person's lines must not supersede each other. And
the block's budget is shared by every earlier session: one long session must not push the others out.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import aiden
from aiden import Config

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

NEWS = "John: I adopted a beagle named Biscuit on 3 May, 2023 from the Oakland shelter."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # a real runtime: threads and files


def _line(session: int, turn: int) -> str:
    return f"John: I visited the museum number {session}{turn:02d} in Lisbon with my sister last weekend."


def _carried(layer: str) -> list[str]:
    """The museum numbers of the block's lines (goals included)."""
    return re.findall(r"museum number (\d+) ", layer)


async def _chat(root: Path, config: Config, turns: list[int], *, news: str = "") -> str:
    """One session per entry of ``turns`` (how many of John's lines it has), ``news`` the first
    session's second line; the block after the last."""
    async with aiden.open_memory(root, config=config) as memory:
        for session, count in enumerate(turns):
            for turn in range(count):
                line = news if news and (session, turn) == (0, 1) else _line(session, turn)
                await memory.begin_run(line, new_session=turn == 0 and session > 0)
                await memory.commit_run(f"Maria: Lovely! Which exhibit did you like best, number {session}{turn:02d}?")
        await memory.rotate()
        return memory.long_term_layer


async def test_every_line_a_speaker_said_reaches_the_next_session(tmp_path: Path) -> None:
    layer = await _chat(tmp_path, Config(durability="none"), [4])
    # The first line is the session's goal; each of the others is a fact of its own.
    assert sorted(_carried(layer)) == ["000", "001", "002", "003"]


async def test_a_long_newer_session_leaves_an_older_sessions_news_in_the_block(tmp_path: Path) -> None:
    # The newest session alone holds more lines than the block (and than a merged section's 50-item
    # cap); filled newest first, the block would hold nothing older.
    layer = await _chat(tmp_path, Config(durability="none"), [3, 60], news=NEWS)
    assert f"- {NEWS}" in layer
    assert len([n for n in _carried(layer) if n[0] == "1"]) >= 15  # the newest session still has most of it


async def test_the_digest_keeps_an_old_sessions_news_over_newer_small_talk(tmp_path: Path) -> None:
    # Each summary past the newest goes into the digest; a chat session's summary alone fills a section
    # of it (50 items), so cut to its newest items the digest would hold nothing older.
    config = Config(durability="none", session_summaries_keep=1, project_memory_tokens=4000)
    layer = await _chat(tmp_path, config, [3, 60, 1], news=NEWS)
    assert f"- {NEWS}" in layer


@pytest.mark.parametrize(
    ("older", "newer", "kept", "gone"),
    [
        # "Database: ..." reads like a speaker's line too; a value, not a sentence, it is a subject's value.
        ("Note: Database: Postgres.", "Note: Database: MySQL.", "PROJECT FACTS\n- Note: Database: MySQL.", "Postgres"),
        # "Deploy Target: <four words or more>" is a subject's value, not a chat line (chat speakers are
        # one name): a newer value replaces the older one.
        (
            "Note: Deploy Target: the new eu-west cluster today.",
            "Note: Deploy Target: the old us-east cluster again.",
            "us-east",
            "eu-west",
        ),
    ],
)
async def test_a_named_value_still_has_its_newest_value_win(
    tmp_path: Path, older: str, newer: str, kept: str, gone: str
) -> None:
    async with aiden.open_memory(tmp_path, config=Config(durability="none")) as memory:
        await memory.begin_run(older)
        await memory.commit_run("Noted.")
        await memory.begin_run(newer, new_session=True)
        await memory.commit_run("Noted.")
        await memory.rotate()
        layer = memory.long_term_layer
    assert kept in layer
    assert gone not in layer
    if kept.startswith("PROJECT FACTS"):
        assert layer.endswith(kept)

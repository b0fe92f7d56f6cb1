"""The digest is bounded by its size, not a count of items, and the PROJECT MEMORY block's sections
share its budget (r64 review of the 400-item digest: a file digest past what the store reads lost its
newest facts, and one section filled the whole block).

Before: a digest section kept at most 50 items, however short (a chat's lines: a quarter of the older
sessions' facts), and the block filled its sections in priority order, so a coding project's many
preferences, failed approaches and recipes left no room for its facts and where the work was left.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import aiden
from aiden import Config
from aiden.longterm.files import (
    MAX_SUMMARY_BYTES,
    digest_path,
    read_summary,
    session_file_name,
    write_summary,
)
from aiden.longterm.summaries import SessionSummary
from aiden.longterm.writer import DIGEST_MAX_BYTES, FileSummaryRows
from aiden.storage.fs import Storage
from aiden.storage.layout import Layout

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]

DAY = 86_400
START = 1_767_000_000
MODULES = ("billing", "auth", "ingest", "search", "export", "worker", "cache")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def chat(s: int) -> SessionSummary:
    """A chat session: 40 lines, each a fact."""
    names = ("Maria", "Joanna")
    return SessionSummary(
        session_id=f"c{s:03d}",
        facts=tuple(
            f"{names[k % 2]}: I went to the pottery class #{s * 40 + k} on day {s} with {k + 2} friends, and we "
            f"glazed {k + 3} bowls in the {MODULES[k % 7]} colours before the kiln opened." for k in range(40)
        ),
    )


def coding(s: int) -> SessionSummary:
    """A coding session: four long items in each of the first three sections, two facts, one outcome."""
    mod = MODULES[s % len(MODULES)]
    return SessionSummary(
        session_id=f"k{s:03d}",
        user_preferences=tuple(
            f"User wants type hints on every public function of src/{mod}/api_{s}_{k}.py and no new "
            f"dependencies in the {mod} service (said in session {s}, preference {k})." for k in range(4)
        ),
        failed_approaches=tuple(
            f"Running `pytest tests/{mod}/test_{mod}_{s}_{k}.py -x` after editing src/{mod}/models_{k}.py failed: "
            f"KeyError: 'tenant_id' at src/{mod}/models_{k}.py:{100 + s}; reverted in session {s}." for k in range(4)
        ),
        working_recipes=tuple(
            f"`make {mod}-{s}-{k} && docker compose run --rm {mod} alembic upgrade head` rebuilds the {mod} "
            f"schema (worked in session {s}, took {10 + k}s)." for k in range(4)
        ),
        facts=tuple(f"src/{mod}/handlers_{s}_{k}.py holds the {mod} webhook retry logic (session {s})." for k in range(2)),
        outcome=(f"Open: the {mod} webhook test still times out in tests/{mod}/test_hooks_{s}.py (session {s}).",),
    )


def project(root: Path, sessions: list[SessionSummary], *, keep: int) -> Layout:
    """``sessions`` closed one a day, each followed by the store cap, as the file store writes them."""
    layout, storage = Layout(root), Storage()
    rows = FileSummaryRows(layout, storage, keep=keep)
    for day, summary in enumerate(sessions):
        write_summary(storage, layout.sessions / session_file_name(START + day * DAY, summary.session_id), summary)
        rows.enforce_cap(START + day * DAY)
    return layout


def test_the_digest_keeps_what_its_bytes_hold_and_reads_back_whole(tmp_path: Path) -> None:
    layout = project(tmp_path, [chat(s) for s in range(14)], keep=2)
    text = digest_path(layout).read_bytes()
    digest = read_summary(digest_path(layout), kind="digest")
    assert digest is not None and digest.through.endswith("-c011")
    lines = sum(len(f"- {item}\n".encode()) for item in digest.facts)
    # Filled to its size (not 50 lines), within it, and far below what the store reads back.
    assert DIGEST_MAX_BYTES - 100 < lines <= DIGEST_MAX_BYTES
    assert len(digest.facts) > 50 and len(text) < MAX_SUMMARY_BYTES // 2
    assert digest.facts[-1] in chat(11).facts  # the newest merged session is in it


async def test_no_section_starves_the_fresh_sessions_block(tmp_path: Path) -> None:
    project(tmp_path, [coding(s) for s in range(20)], keep=3)
    async with aiden.open_memory(tmp_path, config=Config(context_window=32_000, durability="none")) as memory:
        layer = memory.long_term_layer
    assert [part.partition("\n")[0] for part in layer.split("\n\n")] == [
        "PROJECT MEMORY",
        "USER PREFERENCES (follow these)",
        "FAILED APPROACHES (do not repeat)",
        "WORKING RECIPES",
        "PROJECT FACTS",
        "RECENT OUTCOMES",
    ]
    assert f"- {coding(19).outcome[0]}" in layer  # where the work was left
    assert all(f"- {fact}" in layer for fact in coding(19).facts)


def errands(s: int) -> SessionSummary:
    """A chat assistant's session: three preferences, four facts and where it was left; one preference
    restated every fifth session."""
    places = ("Lisbon", "Oslo", "Kyoto", "Lima", "Perth")
    return SessionSummary(
        session_id=f"e{s:03d}",
        user_preferences=tuple(
            f"User prefers {('aisle seats', 'ISO dates', 'Celsius')[k]} for the {places[(s + k) % 5]} trip #{s * 3 + k}."
            for k in range(3)
        )
        + (("User prefers short answers.",) if s % 5 == 0 else ()),
        facts=tuple(
            f"User: I booked the {places[(s + k) % 5]} hotel for day {s % 28 + 1} with booking code BK-{s * 4 + k} "
            f"and paid {40 + k} euros up front." for k in range(4)
        ),
        outcome=(f"Open: confirm booking BK-{s * 4} with the {places[s % 5]} hotel.",),
    )


def sections(layer: str) -> dict[str, list[str]]:
    """The block's item lines per section heading."""
    parts = (part.splitlines() for part in layer.split("\n\n"))
    return {lines[0].split(" (")[0]: [line[2:] for line in lines[1:] if line.startswith("- ")] for lines in parts}


@pytest.fixture(scope="module")
def errand_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """56 sessions closed, 3 kept: the preference restated in session 55, a kept one, is in use, not old."""
    root = tmp_path_factory.mktemp("errands")
    project(root, [errands(s) for s in range(56)], keep=3)
    return root


async def block_of(root: Path, tokens: int) -> dict[str, list[str]]:
    config = Config(context_window=32_000, project_memory_tokens=tokens, durability="none")
    async with aiden.open_memory(root, config=config) as memory:
        return sections(memory.long_term_layer)


@pytest.mark.parametrize("tokens", [1_600, 8_000])
async def test_recent_outcomes_are_the_kept_sessions_and_the_newest_digested(errand_project: Path, tokens: int) -> None:
    block = await block_of(errand_project, tokens)
    # Where the recent sessions left the work, not a thread from 50 sessions back, and only what the rest leaves.
    assert set(block.get("RECENT OUTCOMES", [])) <= {errands(s).outcome[0] for s in range(50, 56)}
    assert block["PROJECT FACTS"]


@pytest.mark.parametrize("tokens", [1_600, 8_000])
async def test_the_preferences_fill_first_newest_said_first(errand_project: Path, tokens: int) -> None:
    block = await block_of(errand_project, tokens)
    # Every preference the kept sessions said, the plain one restated every fifth session among them.
    said = {p for s in (53, 54, 55) for p in errands(s).user_preferences}
    assert "User prefers short answers." in said and said <= set(block["USER PREFERENCES"])

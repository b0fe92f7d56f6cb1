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
from aiden.longterm.project import load_project_memory
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


# r65 re-review of the merged digest: the block's last stage and a kept session's failures.


def backfill(s: int) -> SessionSummary:
    """A busy coding session: 24 short facts, a recipe, a failure every third session, where it was left."""
    return SessionSummary(
        session_id=f"b{s:03d}",
        facts=tuple(
            fact
            for n in range(s * 8, s * 8 + 8)
            for fact in (
                f"Endpoint /api/v{n % 3}/item{n} returns 404 for archived rows",
                f"Config key feature_{n} defaults to off",
                f"Table orders_{n % 17} has index idx_{n}",
            )
        ),
        working_recipes=(f"`make migrate-{s}` applies migration {s}.",),
        failed_approaches=(f"`alembic downgrade {s}` failed: revision not found.",) if s % 3 == 0 else (),
        outcome=(f"Open: finish the orders_{s % 17} backfill (step {s}).",),
    )


def closed_at_once(root: Path, sessions: list[SessionSummary], *, keep: int) -> Layout:
    """``sessions`` written one a day, then one cap: the digest takes all but the newest ``keep``."""
    layout, storage = Layout(root), Storage()
    for day, summary in enumerate(sessions):
        write_summary(storage, layout.sessions / session_file_name(START + day * DAY, summary.session_id), summary)
    FileSummaryRows(layout, storage, keep=keep).enforce_cap(START + len(sessions) * DAY)
    return layout


async def test_where_the_work_was_left_is_in_a_long_projects_default_block(tmp_path: Path) -> None:
    # 30 sessions: the digest holds far more facts than the default 8,000-token fresh block. Before,
    # the outcomes were filled after the durable sections, which took every token: RECENT OUTCOMES was gone.
    layout = closed_at_once(tmp_path, [backfill(s) for s in range(30)], keep=1)
    config = Config(durability="none")
    async with aiden.open_memory(tmp_path, config=config) as memory:
        fresh = sections(memory.long_term_layer)
    compact = sections(str(load_project_memory(layout, config)))  # what a session carries once it compacted
    for block in (fresh, compact):
        assert block["RECENT OUTCOMES"][-1] == backfill(29).outcome[0]
        assert block["PROJECT FACTS"]
    assert len(fresh["PROJECT FACTS"]) > 200 and len(fresh["RECENT OUTCOMES"]) == 4  # the kept one, the digest's 3


def flaky(s: int) -> SessionSummary:
    """Sessions 0-99 finish a module each (a rarer failure every fifth); 100-119 fail on one flaky test."""
    if s < 100:
        return SessionSummary(
            session_id=f"f{s:03d}",
            working_recipes=(f"`make test-mod{s}` runs module {s}'s tests in 4s.",),
            facts=(f"Module mod{s} lives in src/mod{s}.py and owns table t_{s}.",),
            failed_approaches=(f"`pip install legacy{s}` failed: no matching distribution.",) if s % 5 == 0 else (),
            outcome=(f"Done: mod{s} refactor merged as PR #{300 + s}.",),
        )
    return SessionSummary(
        session_id=f"f{s:03d}",
        failed_approaches=(
            f"`pytest tests/test_sync.py -k case{s}` failed: AssertionError: expected 3 rows, got {s % 7}.",
            f"Retrying with --lf in attempt {s} failed: same flaky ordering.",
        ),
        outcome=(f"Open: sync test still flaky after attempt {s}.",),
    )


@pytest.mark.parametrize("tokens", [500, 800])
async def test_the_last_sessions_failures_lead_with_one_session_kept(tmp_path: Path, tokens: int) -> None:
    # With one session kept, every digested item counted one session old: density put the older,
    # rarer "pip install" failures first and the last session's failure was left out.
    layout = closed_at_once(tmp_path, [flaky(s) for s in range(120)], keep=1)
    block = sections(str(load_project_memory(layout, Config(project_memory_tokens=tokens, session_summaries_keep=1))))
    failed = block["FAILED APPROACHES"]
    assert flaky(119).failed_approaches[0] in failed
    assert not any("legacy" in item for item in failed)  # the newest failures first, the old ones after them
    assert block["RECENT OUTCOMES"] == [flaky(s).outcome[0] for s in (116, 117, 118, 119)]

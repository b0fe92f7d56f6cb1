"""Long-term memory fixes from the read-only hunt (notes/hunts/longterm), on the file backend.

- Dream never writes back a long-term file cut at 512 KiB or with its invalid UTF-8 replaced.
- A rotation rebuilds the profile: a save or forget just before it, and an expiry since the last
  rebuild, are right in the new session's layer.
- ``request_dream()`` without a Dream schedule raises instead of queueing a request nothing reads.
- A ``save_memory`` onto an unreadable entry path answers JSON.
- ``dream_log(-1)`` raises DreamError.
- The profile enters the prompt cut to ``project_memory_budget``, saying how many memories it leaves out.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from pathlib import Path

import pytest

import aiden
from aiden import Config, DreamError, Layout, SessionEvent
from aiden.longterm.entries import make_entry
from aiden.longterm.store import LongTermMemoryStore, fit_profile, render_profile
from aiden.policy.tokens import estimate_tokens
from aiden.storage.fs import Storage
from tests.helpers import SMALL_MANUAL, wait_parked

pytestmark = [pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # a real runtime: threads and files


async def _history(memory: aiden.Memory) -> None:
    """One chunk in the history log, for Dream to fold (a fact: an edit of MEMORY.md)."""
    said = ["The staging database port is 5433. " + ("filler words " * 30 if i else "") for i in range(12)]
    await memory.append_many(SessionEvent(type="user_input", role="user", content=text) for text in said)
    assert (await memory.maintain(manual=True)).compacted


@pytest.mark.anyio
async def test_dream_keeps_a_long_term_file_past_512_kib_whole(tmp_path: Path) -> None:
    lt = Layout(tmp_path).long_term
    big = ("# MEMORY\n\n## Notes\n" + "".join(f"- hand note {i:06d} {'x' * 80}\n" for i in range(7000))).encode()
    big += "- THE LAST LINE, café\n".encode()
    assert len(big) > 512 * 1024
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        await _history(memory)
        (lt / "MEMORY.md").write_bytes(big)
        dreamed = await memory.dream()
        assert [(e.file, e.action, e.text) for e in dreamed.edits] == [
            ("MEMORY.md", "add", "The staging database port is 5433.")
        ]
        after = (lt / "MEMORY.md").read_bytes()
        assert after == big + b"\n## Project Facts\n- The staging database port is 5433.\n"
        # The version before the first Dream is the hand-written file, byte for byte.
        assert [v.title for v in await memory.dream_log()][1:] == ["snapshot: long-term files before the first Dream"]
        await memory.dream_restore(1)
        assert (lt / "MEMORY.md").read_bytes() == big


@pytest.mark.anyio
async def test_dream_refuses_a_long_term_file_that_is_not_utf8_and_writes_nothing(tmp_path: Path) -> None:
    lt = Layout(tmp_path).long_term
    user = b"# USER\n\n## Preferences\n- caf\xe9 au lait (a latin-1 byte)\n"
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        await _history(memory)
        lt.mkdir(parents=True, exist_ok=True)
        (lt / "USER.md").write_bytes(user)
        with pytest.raises(
            DreamError,
            match=r"^USER\.md is not valid UTF-8 \(byte 28\): Dream refused, nothing was changed; "
            r"fix or re-save USER\.md as UTF-8$",
        ):
            await memory.dream()
        assert (lt / "USER.md").read_bytes() == user
        assert sorted(p.name for p in lt.iterdir() if p.name.endswith(".md")) == ["USER.md"]
        assert await memory.dream_log() == []
        # Fixed by hand, the same history is folded by the next run.
        (lt / "USER.md").write_bytes(user.replace(b"\xe9", "é".encode()))
        assert (await memory.dream()).ran


@pytest.mark.anyio
async def test_a_memory_saved_just_before_a_new_session_is_in_its_layer(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        await memory.begin_run("Set up the frontend.")
        saved = await memory.handle_tool_call(
            "save_memory", {"type": "preference", "title": "Package manager", "content": "Use pnpm."}
        )
        assert "saved" in json.loads(saved)
        await memory.commit_run("Done.")
        start = await memory.begin_run("Next task.", new_session=True)
        assert start.archived_session_id is not None
        assert "- **Package manager**: Use pnpm." in memory.long_term_layer
        assert "Use pnpm." in json.dumps((await memory.build_messages()).messages)


@pytest.mark.anyio
async def test_a_memory_forgotten_just_before_a_new_session_is_gone_from_its_layer(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        await memory.handle_tool_call(
            "save_memory", {"type": "fact", "title": "Staging host", "content": "db-old.internal", "id": "staging"}
        )
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        assert "db-old.internal" in memory.long_term_layer
        await memory.begin_run("That is wrong, forget it.")
        assert json.loads(await memory.handle_tool_call("forget_memory", {"id": "staging"})) == {
            "forgotten": "staging"
        }
        await memory.commit_run("Forgotten.")
        await memory.begin_run("Next task.", new_session=True)
        assert "db-old.internal" not in memory.long_term_layer


@pytest.mark.anyio
async def test_a_memory_expired_since_the_last_rebuild_leaves_the_next_session_layer(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        await memory.begin_run("First task.")
        await memory.commit_run("Done.")
        # A profile rendered while the memory was live, as a save's rebuild leaves it until anything
        # else rebuilds it (another handle on the same root: time moves without a sleep).
        other = LongTermMemoryStore(Layout(tmp_path), Storage())
        now = time.time()
        await other.save(
            type="fact", title="Temp token", content="token abc123", now=now - 100, expires_at=now - 50
        )
        await other.rebuild_profile(now=now - 75)
        assert "token abc123" in Layout(tmp_path).profile.read_text()
        await memory.begin_run("Next task.", new_session=True)
        assert "token abc123" not in memory.long_term_layer
        assert "token abc123" not in json.dumps((await memory.build_messages()).messages)


@pytest.mark.anyio
async def test_request_dream_without_a_schedule_raises_and_the_memory_still_parks(tmp_path: Path) -> None:
    before = len(asyncio.all_tasks())
    config = Config(durability="none", evict_after_idle_minutes=0.1 / 60)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        await memory.append(SessionEvent(type="user_input", role="user", content="hi"))
        with pytest.raises(
            DreamError,
            match=r"^request_dream needs a Dream schedule \(dream_interval_hours > 0\); dream\(\) runs Dream now$",
        ):
            await memory.request_dream()
        await wait_parked(before)


@pytest.mark.anyio
async def test_save_memory_onto_a_directory_answers_an_error(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        path = Layout(tmp_path).long_term / "memories" / "abc.md"
        path.mkdir(parents=True)
        answer = await memory.handle_tool_call(
            "save_memory", {"type": "fact", "title": "t", "content": "c", "id": "abc"}
        )
        assert json.loads(answer) == {
            "error": f"save_memory: memories/abc.md cannot be read: [Errno 21] Is a directory: '{path}'"
        }
        # Nothing half-saved: the next save with a free id works and the index holds only it.
        saved = json.loads(
            await memory.handle_tool_call("save_memory", {"type": "fact", "title": "t", "content": "c", "id": "ok"})
        )
        assert saved["saved"]["id"] == "ok"
        assert "(abc)" not in (await _new_session_layer(memory))


async def _new_session_layer(memory: aiden.Memory) -> str:
    await memory.begin_run("Next.", new_session=True)
    return memory.long_term_layer


@pytest.mark.anyio
async def test_dream_log_refuses_a_negative_limit(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        with pytest.raises(DreamError, match=r"^dream_log: limit must be >= 0, got -1$"):
            await memory.dream_log(-1)
        assert await memory.dream_log(0) == []


@pytest.mark.anyio
async def test_the_profile_in_the_prompt_fits_its_budget_and_says_what_it_leaves_out(tmp_path: Path) -> None:
    config = Config(durability="none", context_window=8192)
    async with aiden.open_memory(tmp_path, config=config) as memory:
        await memory.begin_run("hello")
        for i in range(120):
            answer = await memory.handle_tool_call(
                "save_memory",
                {"type": "fact", "title": f"Service {i} facts", "content": f"Service {i} runs on port {8000 + i}. " * 4},
            )
            assert "saved" in json.loads(answer)
        await memory.commit_run("hi")
        await memory.begin_run("next task", new_session=True)
        built = await memory.build_messages()
        assert not built.over_budget, built.over_budget_reason
        layer = memory.long_term_layer
        assert estimate_tokens(layer) <= config.project_memory_budget()  # no PROJECT MEMORY block yet
        shown = [int(n) for n in re.findall(r"^- \*\*Service (\d+) facts\*\*", layer, re.MULTILINE)]
        assert 0 < len(shown) < 120
        # The newest are kept, listed oldest first as the profile lists them.
        assert shown == list(range(120 - len(shown), 120))
        assert layer.endswith(f"\n\n({120 - len(shown)} more saved memories are kept but not shown here.)")


def test_fit_profile_keeps_sections_in_order_of_importance_newest_first() -> None:
    entries = [
        make_entry(memory_id=f"{kind}{i}", type=kind, title=f"{kind} {i}", content="x" * 40, created_at=100.0 + i)
        for kind in ("fact", "preference")
        for i in range(3)
    ]
    text = render_profile(entries, now=200.0)
    assert fit_profile(entries, now=200.0, budget_tokens=len(text), estimate=len) == text.strip()
    # Room for the heading, the note and two items: the two newest preferences (before any fact).
    expected = render_profile(entries[4:], now=200.0) + "\n(4 more saved memories are kept but not shown here.)"
    fitted = fit_profile(entries, now=200.0, budget_tokens=len(expected), estimate=len)
    assert fitted == expected
    # One character less: the older preference no longer fits, the (shorter) newest fact does.
    tighter = fit_profile(entries, now=200.0, budget_tokens=len(expected) - 1, estimate=len)
    assert re.findall(r"^- \*\*(\w+ \d)\*\*", tighter, re.MULTILINE) == ["preference 2", "fact 2"]
    assert fit_profile(entries, now=200.0, budget_tokens=10, estimate=len) == ""

"""Issue #20: aiden.sync.open_memory from plain synchronous code; a sync ``with`` on the async API says what to use."""

from __future__ import annotations

import contextlib
import inspect
import json
import threading
import typing
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import anyio
import pytest

import aiden
import aiden.sync
from aiden import ClosedError, Config, SessionEvent
from aiden.context.prompt import validate_chat_sequence

CFG = Config(durability="none", keep_recent_tokens=60, hot_window_events=6, count_compress_after_events=12)


def run_turn(memory: aiden.sync.SyncMemory, n: int) -> None:
    memory.begin_run(f"turn {n}: check the invoice rounding of account {1000 + n}")
    memory.append_message({
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": f"call_{n}", "type": "function",
                        "function": {"name": "run", "arguments": json.dumps({"cmd": f"pytest -k acct{n}"})}}],
    })
    memory.append_message({"role": "tool", "tool_call_id": f"call_{n}", "content": f"acct{n}: 1 passed in 0.{n}s"})
    memory.record_usage(usage={"prompt_tokens": 100 + n, "completion_tokens": 9,
                               "prompt_tokens_details": {"cached_tokens": 50}})
    memory.commit_run(f"Turn {n} done.")


def test_sync_facade_end_to_end_from_plain_code(tmp_path: Path) -> None:
    caller = threading.get_ident()
    with aiden.sync.open_memory(tmp_path, config=CFG) as memory:
        assert memory.root == str(tmp_path.resolve())
        assert not memory.run_active
        for n in range(8):
            run_turn(memory, n)
        stored = memory.append(SessionEvent(type="system_event", role="system", content="context nearly full"))
        outcome = memory.maintain(manual=True)
        hits = memory.recall_session_chunks("pytest acct1")
        answer = json.loads(memory.handle_tool_call("recall_session_chunks", {"query": "acct2 passed"}))
        built = memory.build_messages()
        stats = memory.stats()
        hot = memory.hot_window()
        summary = memory.summary_md()
        names = [t["function"]["name"] for t in memory.tools]
    assert threading.get_ident() == caller
    assert memory.closed
    assert stored.seq == 8 * 4 + 1  # four events a turn: user, tool call, tool result, assistant
    assert outcome.compacted is True
    assert stats.appends == 33 and stats.compactions == 1
    assert stats.cached_share_since_last_compaction is None  # reset by the compaction
    assert summary.startswith("# Session History (compressed chunks)")
    assert [(h.kind, h.first_seq, h.type, h.text) for h in hits[:2]] == [
        ("event", 6, "tool_call", 'run\n{"cmd": "pytest -k acct1"}'),
        ("event", 7, "tool_result", "acct1: 1 passed in 0.1s"),
    ]
    assert (answer["results"][0]["seq"], answer["results"][0]["text"]) == (11, "acct2: 1 passed in 0.2s")
    assert validate_chat_sequence(built.messages) == []
    assert hot[-1] == stored
    assert names == ["recall_session_chunks", "save_memory", "forget_memory", "recall_experience"]

    async def reopen() -> list[SessionEvent]:
        async with aiden.open_memory(tmp_path, config=CFG) as again:
            return await again.hot_window()

    assert anyio.run(reopen) == hot  # everything was committed on close


def test_close_early_then_calls_raise_closed_error(tmp_path: Path) -> None:
    with aiden.sync.open_memory(tmp_path, config=CFG) as memory:
        first = memory.append(SessionEvent(type="user_input", role="user", content="hello"))
        memory.close()
        memory.close()  # idempotent
        with pytest.raises(ClosedError, match="memory is closed"):
            memory.append(SessionEvent(type="user_input", role="user", content="again"))
        with pytest.raises(ClosedError, match="memory is closed"):
            memory.stats()
    assert first.seq == 1


def test_an_error_in_the_block_propagates_and_appends_are_kept(tmp_path: Path) -> None:
    with pytest.raises(KeyError, match="boom"), aiden.sync.open_memory(tmp_path, config=CFG) as memory:
        memory.begin_run("remember this")
        raise KeyError("boom")
    with aiden.sync.open_memory(tmp_path, config=CFG) as memory:
        assert [(e.type, e.content) for e in memory.hot_window()] == [("user_input", "remember this")]
        # Errors of the async API come through unchanged.
        with pytest.raises(aiden.InvalidEventError, match="unknown message role 'critic'"):
            memory.append_message({"role": "critic", "content": "x"})
        assert memory.call(lambda m: m.read_event(1)) == memory.hot_window()[0]


def test_every_public_member_of_memory_has_its_blocking_twin() -> None:
    public = {name for name in dir(aiden.Memory) if not name.startswith("_")}
    assert public - set(dir(aiden.sync.SyncMemory)) == set()
    for name in sorted(public):
        theirs = inspect.getattr_static(aiden.Memory, name)
        mine = inspect.getattr_static(aiden.sync.SyncMemory, name)
        if isinstance(theirs, property):
            assert isinstance(mine, property), name
        else:
            assert inspect.signature(mine) == inspect.signature(theirs), name
            assert mine.__doc__ == theirs.__doc__, name


def test_the_twins_properties_have_the_memorys_types_at_run_time() -> None:
    # help(), autodoc and runtime checkers read the getter's evaluated hints.
    for name in sorted(n for n in dir(aiden.Memory) if not n.startswith("_")):
        theirs = inspect.getattr_static(aiden.Memory, name)
        if isinstance(theirs, property):
            mine = inspect.getattr_static(aiden.sync.SyncMemory, name)
            assert typing.get_type_hints(mine.fget) == typing.get_type_hints(theirs.fget), name
            assert typing.get_type_hints(mine.fget)["return"] is not None, name


def test_the_twins_of_compacted_history_and_long_term_methods_block_and_return(tmp_path: Path) -> None:
    with aiden.sync.open_memory(tmp_path, config=CFG) as memory:
        for n in range(8):
            run_turn(memory, n)
        assert memory.maintain(manual=True).compacted
        entry = memory.chunk_index().chunks[0]
        compacted = memory.rehydrate(entry.chunk_id)
        hit = memory.lookup_chunk(entry.chunk_id)
        checkpoint = memory.checkpoint()
        assert memory.estimate_text("") == 0
        newest = memory.last_activity()
        hot = memory.hot_window()
    assert [e.seq for e in compacted] == list(range(entry.first_seq, entry.last_seq + 1))
    assert hit is not None and (hit.kind, hit.chunk_id) == ("summary", entry.chunk_id)
    assert checkpoint is not None and Path(checkpoint).is_file()
    assert newest == hot[-1].timestamp


def _loop_threads() -> int:
    return sum(t.name == "aiden-memory-loop" for t in threading.enumerate())


def test_sync_memories_open_at_once_share_one_loop_thread(tmp_path: Path) -> None:
    with contextlib.ExitStack() as stack:
        memories = [stack.enter_context(aiden.sync.open_memory(tmp_path / f"m{i}", config=CFG)) for i in range(8)]
        assert _loop_threads() == 1
        assert [m.append(SessionEvent(type="user_input", role="user", content="hi")).seq for m in memories] == [1] * 8
        memories[0].close()
        assert _loop_threads() == 1 and memories[1].stats().appends == 1
    assert _loop_threads() == 0

    def cycles(worker: int) -> list[int]:
        seqs = []
        for _ in range(5):
            with aiden.sync.open_memory(tmp_path / f"w{worker}", config=CFG) as memory:
                seqs.append(memory.append(SessionEvent(type="user_input", role="user", content="again")).seq)
        return seqs

    # Threads opening and closing at once: each open finds a running loop thread or starts one.
    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(cycles, range(4))) == [[1, 2, 3, 4, 5]] * 4
    assert _loop_threads() == 0


def test_sync_with_on_the_async_api_names_both_ways(tmp_path: Path) -> None:
    with pytest.raises(TypeError) as info, aiden.open_memory(tmp_path):
        pass
    assert str(info.value) == (
        "aiden.open_memory() is an async context manager: use `async with aiden.open_memory(...) as memory:` "
        "inside a coroutine, or `with aiden.sync.open_memory(...) as memory:` from synchronous code"
    )
    assert not (tmp_path / "memory").exists()  # nothing was opened


def test_sync_with_on_open_host_names_async_with() -> None:
    with pytest.raises(TypeError) as info, aiden.open_host():
        pass
    assert str(info.value) == (
        "aiden.open_host() is an async context manager: use `async with aiden.open_host(...) as host:` "
        "inside a coroutine"
    )


@pytest.mark.anyio
async def test_async_with_is_unchanged(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=CFG) as memory:
        assert isinstance(memory, aiden.Memory)
        stored = await memory.append(SessionEvent(type="user_input", role="user", content="hi"))
    assert stored.seq == 1
    with pytest.raises(ValueError, match="inside"):
        async with aiden.open_memory(tmp_path, config=CFG):
            raise ValueError("raised inside the block")

"""Durable appends through the session-writer actor."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.events import encode_event
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout

pytestmark = pytest.mark.anyio

FAST = Config(durability="none", count_compress_after_events=10**6)


def disk_events(root: Path) -> list[SessionEvent]:
    return scan(read_bytes(Layout(root).events)).events


async def test_append_assigns_gap_free_seqs_and_reads_back(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        first = await memory.append(SessionEvent(type="user_input", role="user", content="hello"))
        rest = await memory.append_many(
            [
                SessionEvent(type="assistant_output", role="assistant", content="hi"),
                SessionEvent(type="tool_call", tool_name="ls", tool_call_id="c1", tool_args="{}"),
            ]
        )
        hot = await memory.hot_window()
    assert [first.seq, *[e.seq for e in rest]] == [1, 2, 3]
    assert [e.content for e in hot] == ["hello", "hi", ""]
    assert [e.seq for e in hot] == [1, 2, 3]
    assert first.timestamp is not None


# 64 concurrent appenders keep every group commit full and interleaved; 40 appends each (2,560
# fsynced events, dozens of group commits) prove exactly-once as well as 32k did, in a tenth of the time.
APPENDERS, APPENDS_EACH = 64, 40


async def test_64_concurrent_appenders_each_event_present_once(tmp_path: Path) -> None:
    acked: list[int] = []
    total = APPENDERS * APPENDS_EACH

    async with aiden.open_memory(
        tmp_path, config=Config(durability="fsync", count_compress_after_events=10**6)
    ) as memory:

        async def appender(n: int) -> None:
            for i in range(APPENDS_EACH):
                ev = await memory.append(SessionEvent(type="user_input", content=f"{n}:{i}"))
                acked.append(ev.seq)

        async with anyio.create_task_group() as tg:
            for n in range(APPENDERS):
                tg.start_soon(appender, n)
    events = disk_events(tmp_path)
    seqs = [e.seq for e in events]
    assert len(acked) == total
    assert sorted(acked) == list(range(1, total + 1))
    assert seqs == list(range(1, total + 1))
    assert sorted(e.content for e in events) == sorted(
        f"{n}:{i}" for n in range(APPENDERS) for i in range(APPENDS_EACH)
    )


async def test_event_id_dedupes_a_retried_append(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        a = await memory.append(SessionEvent(type="user_input", content="x", event_id="req-1"))
        b = await memory.append(SessionEvent(type="user_input", content="x", event_id="req-1"))
        c = await memory.append(SessionEvent(type="user_input", content="y"))
    assert (a.seq, b.seq, c.seq) == (1, 1, 2)
    assert [e.seq for e in disk_events(tmp_path)] == [1, 2]
    # ... and across a reopen (the writer learns ids from the hot window).
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        d = await memory.append(SessionEvent(type="user_input", content="x", event_id="req-1"))
    assert d.seq == 1
    assert [e.seq for e in disk_events(tmp_path)] == [1, 2]


@pytest.mark.parametrize(
    "bad",
    [
        SessionEvent(type="bogus", content="x"),  # type: ignore[arg-type]
        SessionEvent(type="user_input", content="lone \ud800 surrogate"),
        SessionEvent(type="user_input", content="x" * 5000),
        SessionEvent(type="user_input", content=123),  # type: ignore[arg-type]
        SessionEvent(type="user_input", meta={"k": object()}),
    ],
)
async def test_bad_events_rejected_before_any_byte(tmp_path: Path, bad: SessionEvent) -> None:
    async with aiden.open_memory(tmp_path, config=Config(durability="none", max_event_bytes=4096)) as memory:
        await memory.append(SessionEvent(type="user_input", content="ok"))
        before = read_bytes(Layout(tmp_path).events)
        with pytest.raises(aiden.InvalidEventError):
            await memory.append(bad)
        after = read_bytes(Layout(tmp_path).events)
        ok = await memory.append(SessionEvent(type="user_input", content="still fine"))
    assert before == after
    assert ok.seq == 2


async def test_oversized_event_is_event_too_large(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=Config(durability="none", max_event_bytes=1024)) as memory:
        # The message names the configured limit, not what is left of it once the seq's room is kept.
        with pytest.raises(aiden.EventTooLargeError, match=r"^event of \d+ bytes exceeds max_event_bytes=1024 less 32 "):
            await memory.append(SessionEvent(type="tool_result", content="y" * 2000))
    assert read_bytes(Layout(tmp_path).events) == b""


@pytest.mark.parametrize("cut", ["zero", "one", "middle", "len-1", "zeros", "garbage"])
async def test_torn_tail_is_quarantined_and_next_append_not_glued(tmp_path: Path, cut: str) -> None:
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        for i in range(3):
            await memory.append(SessionEvent(type="user_input", content=f"e{i}"))
    layout = Layout(tmp_path)
    data = layout.events.read_bytes()
    fourth = encode_event(SessionEvent(type="user_input", content="e3", seq=4))
    partial = {
        "zero": b"",
        "one": fourth[:1],
        "middle": fourth[: len(fourth) // 2],
        "len-1": fourth[:-1],
        "zeros": b"\x00" * 17,
        "garbage": b"\xff\xfe{not json",
    }[cut]
    # A crash in the middle of appending a 4th line: never acknowledged.
    layout.events.write_bytes(data + partial)
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        ev = await memory.append(SessionEvent(type="user_input", content="after"))
        hot = await memory.hot_window()
    assert [e.content for e in hot] == ["e0", "e1", "e2", "after"]
    assert ev.seq == 4
    assert layout.events.read_bytes().endswith(b"\n")
    if partial:
        assert partial in layout.quarantine.read_bytes()


async def test_torn_tail_written_while_open_is_repaired_by_the_writer(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        await memory.append(SessionEvent(type="user_input", content="a"))
        # Another process died mid-line.
        await anyio.Path(layout.events).write_bytes(
            layout.events.read_bytes() + b'{"type":"user_input","content":"tor'
        )
        ev = await memory.append(SessionEvent(type="user_input", content="b"))
        hot = await memory.hot_window()
    assert ev.seq == 2
    assert [e.content for e in hot] == ["a", "b"]
    assert b'"content":"tor' in layout.quarantine.read_bytes()


async def test_screenshot_data_is_scrubbed_before_persistence(tmp_path: Path) -> None:
    payload = json.dumps({"width": 1080, "height": 1920, "format": "png", "data": "iVBORw0KGgo" + "A" * 4000})
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        ev = await memory.append(SessionEvent(type="tool_result", tool_name="screenshot", content=payload))
    stored = disk_events(tmp_path)[0]
    assert stored == ev
    body = json.loads(stored.content)
    assert "data" not in body
    assert (body["width"], body["height"], body["format"]) == (1080, 1920, "png")


async def test_append_after_close_raises(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=FAST) as memory:
        pass
    with pytest.raises(aiden.ClosedError):
        await memory.append(SessionEvent(type="user_input", content="late"))


_CHILD = textwrap.dedent(
    """
    import sys, anyio, aiden
    from aiden import Config, SessionEvent

    async def main() -> None:
        async with aiden.open_memory(sys.argv[1], config=Config(count_compress_after_events=10**6)) as memory:
            async def one(t: int) -> None:
                for i in range(150):
                    ev = await memory.append(SessionEvent(type="user_input", content=f"{sys.argv[2]}:{t}:{i}"))
                    print(ev.seq, flush=True)
            async with anyio.create_task_group() as tg:
                for t in range(4):
                    tg.start_soon(one, t)

    anyio.run(main)
    """
)


def test_two_processes_append_to_the_same_session(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(tmp_path), name], stdout=subprocess.PIPE, text=True, env=env
        )
        for name in ("p1", "p2")
    ]
    acked: list[int] = []
    for p in procs:
        out, _ = p.communicate(timeout=60)
        assert p.returncode == 0
        acked.extend(int(line) for line in out.split())
    events = disk_events(tmp_path)
    assert len(acked) == 2 * 4 * 150
    assert sorted(acked) == list(range(1, 1201))
    assert [e.seq for e in events] == list(range(1, 1201))
    assert len({e.content for e in events}) == 1200


def test_events_are_not_tracked_by_the_garbage_collector() -> None:
    # A pass decodes thousands of events; untracked, they do not make full collections due.
    import gc

    event = SessionEvent(type="tool_result", content="ok", meta={"exit_code": 0, "paths": ["a", "b"]})
    assert gc.is_tracked(event) is False

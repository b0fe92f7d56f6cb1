"""Torn tails, from the power-loss / recovery side (tests/foundation covers the plain cases).

The last line of events.jsonl is cut as a power loss would leave it — at byte 0, 1, the middle,
len-1, zero-filled (a whole page), garbage, or inside a multi-event batch — in a session that
already has chunks (a replaced events.jsonl) or was just rotated. Recovery keeps every complete line,
quarantines the torn bytes, reports no loss (a torn line was never acknowledged), the next append is
not glued to the torn bytes and continues the sequence, and a second recovery changes nothing. A
torn tail met by a compaction (not by an append or a reopen) is handled the same way.
"""

from __future__ import annotations

import random
from pathlib import Path

import anyio
import pytest

import aiden
from aiden import Config, SessionEvent
from aiden.events import encode_event
from aiden.storage.jsonl import read_bytes, scan
from aiden.storage.layout import Layout
from aiden.testing import RecordingStorage, ScriptedSummarizer
from tests.helpers import SMALL_MANUAL
from tests.reliability.harness import check, read_root, report, tag_of, tagged_event

pytestmark = pytest.mark.anyio

CONFIG = Config(
    durability="fsync",
    keep_recent_tokens=60,
    hot_window_events=6,
    count_compress_after_events=10**6,
    summary_max_chunks=3,
)

CUTS = ["zero", "one", "middle", "len-1", "zeros-page", "garbage", "batch-cut"]


async def _session(root: Path, state: str) -> tuple[dict[str, int], int]:
    """A session in ``state``; returns (acked tag -> seq, last seq of the active session)."""
    rng = random.Random(state)
    acked: dict[str, int] = {}
    async with aiden.open_memory(root, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        for i in range(24):
            ev = await memory.append(tagged_event(f"a:{i}", i, rng))
            acked[f"a:{i}"] = ev.seq
        assert (await memory.maintain(manual=True)).compacted
        for i in range(24, 28):
            ev = await memory.append(tagged_event(f"a:{i}", i, rng))
            acked[f"a:{i}"] = ev.seq
        if state == "after-rotation":
            await memory.rotate("before-tear")
    active = read_root(root)[-1]
    return acked, max((e.seq for e in active.events), default=0)


def _tear(cut: str, next_seq: int, rng: random.Random) -> tuple[bytes, list[str]]:
    """Bytes a power loss left after the last complete line, and the tags of complete lines among them."""
    line = encode_event(SessionEvent(type="user_input", content="torn:0 never acknowledged", seq=next_seq))
    if cut == "zero":
        return b"", []
    if cut == "one":
        return line[:1], []
    if cut == "middle":
        return line[: len(line) // 2], []
    if cut == "len-1":
        return line[:-1], []
    if cut == "zeros-page":
        return b"\x00" * 4096, []
    if cut == "garbage":
        return bytes(rng.randrange(256) for _ in range(300)).replace(b"\n", b"\xff"), []
    # batch-cut: one write of three events; the first line made it, the second is cut mid-way.
    batch = [
        encode_event(SessionEvent(type="user_input", content=f"batch:{k} in flight", seq=next_seq + k))
        for k in range(3)
    ]
    return batch[0] + batch[1][: len(batch[1]) // 3], ["batch:0"]


@pytest.mark.parametrize("state", ["after-compaction", "after-rotation"])
@pytest.mark.parametrize("cut", CUTS)
async def test_torn_tail_after_replace_or_rotation(tmp_path: Path, cut: str, state: str) -> None:
    acked, last = await _session(tmp_path, state)
    layout = Layout(tmp_path)
    tail, complete = _tear(cut, last + 1, random.Random(cut))
    clean = read_bytes(layout.events)
    layout.events.write_bytes(clean + tail)
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        first = memory.recovery
        nxt = await memory.append(SessionEvent(type="user_input", role="user", content="n:0 after the tear"))
        hot = await memory.hot_window()
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        second = memory.recovery
    data = read_bytes(layout.events)
    torn_bytes = tail[len(b"".join(_lines_of(tail, complete))) :]
    quarantined = read_bytes(layout.quarantine)
    verdict = check(tmp_path, {**acked, "n:0": nxt.seq}, {*acked, "n:0", "batch:0"})
    report(
        f"torn tail {cut} {state}",
        torn_bytes=len(torn_bytes),
        quarantined=len(torn_bytes) > 0 and torn_bytes in quarantined,
        next_seq=nxt.seq,
        unrecoverable=len(first.unrecoverable),
        **verdict.figures(),
    )
    assert first.torn_tail_bytes == len(torn_bytes)
    assert not first.unrecoverable, first.unrecoverable
    assert second.changed is False
    if torn_bytes:
        assert torn_bytes in quarantined
    assert data.endswith(b"\n") and not scan(data).bad_lines, "the next append was glued to torn bytes"
    assert [tag_of(e) for e in hot][-1 - len(complete) :] == [*complete, "n:0"]
    assert nxt.seq == last + 1 + len(complete)
    assert verdict.ok, verdict.explain()


def _lines_of(tail: bytes, complete: list[str]) -> list[bytes]:
    lines = tail.splitlines(keepends=True)
    return lines[: len(complete)]


async def test_torn_tail_met_by_compaction_before_any_append(tmp_path: Path) -> None:
    rng = random.Random(9)
    acked: dict[str, int] = {}
    layout = Layout(tmp_path)
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        for i in range(30):
            ev = await memory.append(tagged_event(f"a:{i}", i, rng))
            acked[f"a:{i}"] = ev.seq
        # Another process died mid-append: its partial line is the file's tail now.
        partial = encode_event(SessionEvent(type="user_input", content="torn:0", seq=31))[:17]
        async with await anyio.Path(layout.events).open("ab") as f:
            await f.write(partial)
        outcome = await memory.maintain(manual=True)
        nxt = await memory.append(SessionEvent(type="user_input", content="n:0 after"))
        acked["n:0"] = nxt.seq
    async with aiden.open_memory(tmp_path, config=CONFIG, summarizer=ScriptedSummarizer()) as memory:
        recovery = memory.recovery
    verdict = check(tmp_path, acked, set(acked))
    report(
        "torn tail met by a compaction",
        compacted=outcome.compacted,
        next_seq=nxt.seq,
        recovery_changed=recovery.changed,
        **verdict.figures(),
    )
    assert outcome.compacted
    assert nxt.seq == 31
    assert partial in read_bytes(layout.quarantine)
    assert recovery.changed is False and not recovery.unrecoverable
    assert verdict.ok, verdict.explain()


async def test_a_torn_tail_is_cut_in_place_without_a_copy_of_the_log(tmp_path: Path) -> None:
    # [Reliability] finding 10: with the disk nearly full, recovery must not need room for a
    # second events.jsonl. The complete lines stay where they are; only the tail goes.
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        await memory.append_many(
            SessionEvent(type="user_input", role="user", content=f"kept line {n} " * 40) for n in range(50)
        )
    events = Layout(tmp_path).events
    whole = events.read_bytes()
    events.write_bytes(whole + b'{"type": "user_input", "content": "torn')
    storage = RecordingStorage()
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL, storage=storage) as memory:
        assert len(await memory.hot_window()) == 50
        report = memory.recovery
    assert report.torn_tail_bytes == len(b'{"type": "user_input", "content": "torn')
    # No temp copy of the log was written and nothing replaced it.
    assert [op.kind for op in storage.ops if "events.jsonl" in op.target] == []
    assert [op for op in storage.ops if "recover_events" in op.path or ".aiden-tmp-events" in op.path] == []
    assert events.read_bytes() == whole


async def test_a_directory_named_like_a_temp_file_does_not_stop_the_open(tmp_path: Path) -> None:
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        await memory.append(SessionEvent(type="user_input", role="user", content="kept"))
    stray = Layout(tmp_path).events.parent / ".aiden-tmp-events.jsonl.left"
    stray.mkdir()  # not aiden's: it writes temp files only
    (Layout(tmp_path).events.parent / ".aiden-tmp-events.jsonl.old").write_bytes(b"{")  # a temp file left
    async with aiden.open_memory(tmp_path, config=SMALL_MANUAL) as memory:
        assert [e.content for e in await memory.hot_window()] == ["kept"]
        assert memory.recovery.temp_files_removed == 1
    assert stray.is_dir()
